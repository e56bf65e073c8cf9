"""Where the model library looks besides the app's own models folder, as Settings keeps it:
folders the user named, and files added one by one (each file alone, never its folder)."""

from __future__ import annotations

from pathlib import Path

from ui.settings import Settings


def library_folders(settings: Settings, models_folder: Path) -> list[Path]:
    """The user's folders and the files added one by one."""
    places = [Path(f) for f in settings.get_list("models/extra_folders")]
    for file in settings.get_list("models/extra_files"):
        path = Path(file)
        # The app's models folder is always scanned; listing it again would only duplicate.
        if path not in places and not path.is_relative_to(models_folder):
            places.append(path)
    return places


def keep_library_folders(settings: Settings, models_folder: Path, places: list[Path]) -> None:
    """The Models dialog's list of folders and files changed: keep exactly these."""
    kept = [Path(p) for p in places]
    files = settings.get_list("models/extra_files")
    removed = [p for p in library_folders(settings, models_folder) if p not in kept]
    settings.set("models/extra_files", [f for f in files if Path(f) not in removed])
    added_files = {Path(f) for f in files}
    settings.set("models/extra_folders", [str(p) for p in kept if p not in added_files])
