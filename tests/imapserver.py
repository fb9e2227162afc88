"""A real IMAP server on 127.0.0.1 for tests: Debian's dovecot (scripts/imap installs it), run as an
unprivileged process with a config written here, plain login allowed on loopback. `add_user()` gives
each test a mailbox of its own; `append()` delivers mail with IMAP APPEND."""

from __future__ import annotations

import imaplib
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from frobozz._children import as_account, dying_with_parent
from tests.ports import free_port

DOVECOT = shutil.which("dovecot") or "/usr/sbin/dovecot"


@dataclass
class ImapServer:
    port: int
    folder: Path
    process: subprocess.Popen

    users: list[tuple[str, str]]

    def add_user(self) -> tuple[str, str]:
        """A mailbox of its own (the users are written before dovecot starts: it rereads its passwd file
        only when the file's mtime, in whole seconds, changes)."""
        return self.users.pop()

    def url(self, user: str, folder: str = "INBOX") -> str:
        return f"imap://{user}@127.0.0.1:{self.port}/{folder}"

    def client(self, user: str, password: str) -> imaplib.IMAP4:
        client = imaplib.IMAP4("127.0.0.1", self.port, timeout=30)
        client.login(user, password)
        return client

    def append(self, user: str, password: str, *mails: bytes, folder: str = "INBOX") -> None:
        """The mails into `folder` (made if missing)."""
        client = self.client(user, password)
        try:
            name = '"' + folder.replace("\\", "\\\\").replace('"', '\\"') + '"'
            if folder != "INBOX":
                client.create(name)
            for mail in mails:
                typ, data = client.append(name, None, None, mail)
                assert typ == "OK", data
        finally:
            client.logout()

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        shutil.rmtree(self.folder, ignore_errors=True)


def start_imap() -> ImapServer:
    if not os.access(DOVECOT, os.X_OK):
        raise RuntimeError("the inbox tests need Debian's dovecot-imapd: run scripts/imap")
    account = pwd.getpwnam("nobody") if os.geteuid() == 0 else pwd.getpwuid(os.geteuid())
    user, group = account.pw_name, account.pw_gid
    import grp

    group_name = grp.getgrgid(group).gr_name
    folder = Path(tempfile.mkdtemp(prefix="frobozz-imap-"))
    port = free_port()
    for sub in ("run", "state", "home"):
        (folder / sub).mkdir()
    users = [(f"u{secrets.token_hex(4)}", secrets.token_hex(8)) for _ in range(200)]
    (folder / "passwd").write_text("".join(f"{u}:{{PLAIN}}{p}\n" for u, p in users))
    (folder / "dovecot.conf").write_text(f"""
base_dir = {folder}/run
state_dir = {folder}/state
log_path = {folder}/log
instance_name = frobozz-test-{port}
protocols = imap
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
auth_failure_delay = 0
default_internal_user = {user}
default_internal_group = {group_name}
default_login_user = {user}
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {folder}/passwd
}}
userdb {{
  driver = static
  args = uid={user} gid={group_name} home={folder}/home/%u
}}
mail_location = maildir:~/Maildir
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {port}
  }}
  inet_listener imaps {{
    port = 0
  }}
  chroot =
}}
service anvil {{
  chroot =
  unix_listener anvil-auth-penalty {{
    mode = 0
  }}
}}
service stats {{
  chroot =
}}
""")
    command = [DOVECOT, "-F", "-c", str(folder / "dovecot.conf")]
    if os.geteuid() == 0:
        folder.chmod(0o755)
        for path in [folder, *folder.rglob("*")]:
            os.chown(path, account.pw_uid, group)
        command = as_account(command, account.pw_uid, group) or command
    else:
        command = dying_with_parent(command)
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"dovecot did not start: {process.stderr.read().decode()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                if s.recv(100).startswith(b"* OK"):
                    return ImapServer(port, folder, process, users)
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError("dovecot did not answer within 30 s")
