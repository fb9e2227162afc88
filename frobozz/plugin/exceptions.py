"""The plugin's errors: one root; each message says what is wrong and what to do."""


class PluginError(Exception):
    """Root of every error the plugin raises on purpose (installing it, or its daemon's answers)."""
