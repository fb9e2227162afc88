"""Frobozz: an MCP tool hub and a headless game runner for Claude."""

__version__ = "0.1.0"
