#!/bin/sh
# Adds SpecChat to the desktop's application menu for this user: a launcher and an icon in
# the freedesktop folders, pointing at the specchat executable next to this script.
# Run it again after moving the folder. ./uninstall.sh takes the menu entry away again.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
exe="$here/specchat"
if [ ! -x "$exe" ]; then
    echo "error: $exe is missing; run this script from the unpacked SpecChat folder" >&2
    exit 1
fi
case $here in
    *[\"\`\$\\]*)
        echo "error: the folder path $here contains a quote, \$, \` or \\; move SpecChat" \
            "to a plainer path and run this again" >&2
        exit 1 ;;
esac

data=${XDG_DATA_HOME:-$HOME/.local/share}
apps="$data/applications"
icons="$data/icons/hicolor/scalable/apps"
mkdir -p "$apps" "$icons"
cp "$here/_internal/share/specchat.svg" "$icons/specchat.svg"
# Exec takes a quoted absolute path (the folder may have spaces); a literal % is written %%.
exec_path=$(printf '%s' "$exe" | sed 's/%/%%/g')
sed -e "s|^Exec=.*|Exec=\"$exec_path\"|" \
    -e "s|^TryExec=.*||" \
    "$here/_internal/share/specchat.desktop" >"$apps/specchat.desktop.partial"
printf 'TryExec=%s\n' "$exe" >>"$apps/specchat.desktop.partial"
mv "$apps/specchat.desktop.partial" "$apps/specchat.desktop"

# Menus notice new entries by themselves; refreshing the caches only makes it quicker.
if command -v update-desktop-database >/dev/null 2>&1; then
    update-desktop-database "$apps" 2>/dev/null || true
fi
if command -v gtk-update-icon-cache >/dev/null 2>&1; then
    gtk-update-icon-cache -q -t "$data/icons/hicolor" 2>/dev/null || true
fi
echo "SpecChat added to the application menu: $apps/specchat.desktop -> $exe"
