"""ndif's keys database for `make test-remote`: a Postgres server, its tables, its keys.

ndif 0.1.2 turns auth on when ``NDIF_POSTGRES_URL`` is set: its API then looks the request's
``ndif-api-key`` up in Postgres (``ndif.services.api.auth._KEY_QUERY``, over ``keys``,
``users``, ``user_tags`` and ``key_user_tag_assignments``), refuses a key it does not find,
and runs the request unsandboxed only if the key carries the ``trusted`` user_tag. The
server is PostgreSQL from ``pgserver``'s wheel (its bundled binaries, run here in the
foreground so that the harness stops it by process group like the rest); the tables are
those four, with the columns ndif's query reads, as ndif's ``docker/postgres/init.sql``
makes them; the API connects as a read-only role, as ndif's does in production. The rows
are made by the SQL block of docs/remote.md's operator recipe, run as written, so the
recipe is what the run tests.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import re
from pathlib import Path

#: pgserver's bundled PostgreSQL (found, not imported: importing pgserver sets up its own
#: server manager, which is not used here).
BIN = Path(importlib.util.find_spec("pgserver").origin).parent / "pginstall" / "bin"
PORT = 5432
DATABASE = "ndif"
ROLE, PASSWORD = "ndifapi", "vlreg-test-only"  # the API's read-only role; the superuser is `postgres`
RECIPE = Path(__file__).resolve().parents[2] / "docs" / "remote.md"
#: The recipe's researchers: the one whose key is trusted, and the one whose key is not.
TRUSTED, ORDINARY = "maintainer@example.edu", "researcher@example.edu"

TABLES = f"""
CREATE DATABASE {DATABASE};
\\connect {DATABASE}
CREATE TABLE users (
    user_id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    email VARCHAR(255) UNIQUE NOT NULL
);
CREATE TABLE keys (
    key_id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id UUID NOT NULL REFERENCES users (user_id) ON DELETE CASCADE
);
CREATE TABLE user_tags (
    user_tag_id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    name VARCHAR(50) UNIQUE NOT NULL,
    description TEXT
);
CREATE TABLE key_user_tag_assignments (
    key_id UUID NOT NULL REFERENCES keys (key_id) ON DELETE CASCADE,
    user_tag_id UUID NOT NULL REFERENCES user_tags (user_tag_id) ON DELETE RESTRICT,
    PRIMARY KEY (key_id, user_tag_id)
);
CREATE ROLE {ROLE} LOGIN PASSWORD '{PASSWORD}';
GRANT SELECT ON users, keys, user_tags, key_user_tag_assignments TO {ROLE};
"""


def url() -> str:
    """``NDIF_POSTGRES_URL`` for the API: the read-only role, over loopback."""
    return f"postgresql://{ROLE}:{PASSWORD}@127.0.0.1:{PORT}/{DATABASE}"


def recipe() -> str:
    """The ```sql block of docs/remote.md (there is one: the operator's keys step)."""
    (block,) = re.findall(r"```sql\n(.*?)```", RECIPE.read_text(), re.S)
    return block


def as_postgres() -> list[str]:
    """The prefix that runs a command as an unprivileged user where this runs as root
    (postgres refuses to run as root), else nothing."""
    if os.geteuid() != 0:
        return []
    nobody = pwd.getpwnam("nobody")
    return ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups"]


def hand_over(data: Path) -> None:
    """Make ``data`` (in the run's scratch folder) the server's, where it runs as `nobody`:
    its folder and the binaries' must let that user through."""
    if os.geteuid() != 0:
        return
    nobody = pwd.getpwnam("nobody")
    os.chown(data, nobody.pw_uid, nobody.pw_gid)
    data.parent.chmod(0o711)
    for folder in (BIN, *BIN.parents):
        if not folder.stat().st_mode & 0o001:
            raise SystemExit(
                f"test-remote runs Postgres as `nobody` (it refuses root), which cannot enter {folder}: "
                f"clone into a folder others may enter (chmod o+x), or run as another user"
            )


def initdb(data: Path) -> list[str]:
    """The command that makes the server's data folder: local connections trusted (the
    harness's own, as the superuser), loopback ones by password."""
    return [
        *as_postgres(), str(BIN / "initdb"), "-D", str(data), "-U", "postgres", "-E", "utf8", "--no-sync",
        "--auth-local=trust", "--auth-host=scram-sha-256",
    ]


def server(data: Path) -> list[str]:
    """The server, in the foreground: loopback only, its socket in its data folder."""
    return [*as_postgres(), str(BIN / "postgres"), "-D", str(data), "-h", "127.0.0.1", "-p", str(PORT), "-k", str(data)]


def psql(data: Path, database: str = "postgres") -> list[str]:
    """psql as the superuser over the server's socket, stopping at the first error."""
    return [str(BIN / "psql"), "-h", str(data), "-p", str(PORT), "-U", "postgres", "-d", database,
            "-v", "ON_ERROR_STOP=1", "-X", "-q"]


def keys_query() -> str:
    """Each researcher's email and API key, one ``email|key`` line each."""
    return "SELECT users.email, keys.key_id FROM keys JOIN users USING (user_id) ORDER BY users.email"
