"""The forge's errors: one root; each message says what to fix."""


class ForgeError(Exception):
    """Root of every error the forge raises on purpose."""


class BadRequestError(ForgeError):
    """The call's arguments cannot be sent to this backend (empty prompt, size out of range, …)."""


class BackendError(ForgeError):
    """The backend is down, failed, was too slow, or answered with something that is not an image."""
