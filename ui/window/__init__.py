"""The main window and what drives it: chat, model session, reply bookkeeping."""
