"""The PySide6 window. The only package allowed to import Qt."""
