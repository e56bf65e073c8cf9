"""Dialogs opened from the window: the model library and Compare drafts."""
