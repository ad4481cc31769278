"""Part of the hostile stand-in for ppbook (see ``ppbook/__init__.py`` here)."""
