"""Widgets the window is built from; they display what they are given."""
