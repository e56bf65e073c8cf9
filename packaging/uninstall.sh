#!/bin/sh
# Takes SpecChat out of the application menu (what install.sh added). The program folder and
# your conversations and models (in ~/.local/share/specchat) are left alone: delete the folder
# to remove the program.
set -eu

data=${XDG_DATA_HOME:-$HOME/.local/share}
rm -f "$data/applications/specchat.desktop" "$data/icons/hicolor/scalable/apps/specchat.svg"
if command -v update-desktop-database >/dev/null 2>&1; then
    update-desktop-database "$data/applications" 2>/dev/null || true
fi
echo "SpecChat removed from the application menu."
