"""The claude CLI as a duplex session: producers, a queue, the subprocess, a router, observers."""
