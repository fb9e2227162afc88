"""Headless play sessions: claude plays a Z-machine game through the engine."""
