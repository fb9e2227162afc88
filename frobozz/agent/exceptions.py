"""The agent service's errors: one root, each with the HTTP status a client gets for it."""


class AgentError(Exception):
    """Root of every error the agent service raises on purpose; `status` is what HTTP answers."""

    status = 500


class WorkspaceError(AgentError):
    """A workspace that is not under the root (`..`, an absolute path, a symlink out), or a bad name."""

    status = 400


class SessionNotFoundError(AgentError):
    """No such session, or not under the workspace (or user) asked about."""

    status = 404


class QuestionError(AgentError):
    """An answer to a question that is not waiting (unknown, already answered, timed out)."""

    status = 409


class InputError(AgentError):
    """A request whose values are wrong (empty text, a bad history or attachment)."""

    status = 400


class ForbiddenError(AgentError):
    """A token whose grant does not name the workspace's user."""

    status = 403


class BusyError(AgentError):
    """agentapi's rule: a message only while the agent is stable (our own route queues it instead)."""

    status = 409


class LeaseLostError(AgentError):
    """A write from an instance that no longer holds the session's lease (another has taken it over)."""

    status = 409


class HistoryError(AgentError):
    """git failed in a workspace's history (its message says how)."""


class TooLargeError(InputError):
    """A request or file over its limit."""

    status = 413
