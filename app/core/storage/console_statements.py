"""What the SQLite and PostgreSQL stores say alike about the console (D35), written once:
the schema of its migration and the Store's methods for console users, their sessions and
the audit log (ConsoleStatements), with the records they hand back. Each store gives the
placeholder and three ways to run SQL (a read, one write, several writes in one
transaction), as for webhooks (webhook_statements.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from app.core.errors import DuplicateUser

# D35 (the console's migration of both stores): console users, who are not API keys; their
# sessions, each kept as the SHA-256 digest of its id (never the id), with its
# synchronizer token and its stage (signed in, or still owing a new password or a second
# factor); and the audit log. An order cancelled from the console records the user, as
# one cancelled through the API records its key (D2). Session times are Unix times (they
# are compared on every page); the others ISO 8601 text, as everywhere.
CONSOLE_SCHEMA = (
    "CREATE TABLE console_users ("
    " id {id},"
    " name TEXT NOT NULL,"
    " password_hash TEXT NOT NULL,"
    " must_change_password INTEGER NOT NULL DEFAULT 1,"
    " totp_secret TEXT,"
    " totp_last_step BIGINT,"
    " disabled_at TEXT,"
    " created_at TEXT NOT NULL,"
    " last_sign_in_at TEXT)",
    "CREATE UNIQUE INDEX idx_console_users_name ON console_users (name)",
    "CREATE TABLE console_sessions ("
    " digest TEXT PRIMARY KEY,"
    " user_id BIGINT NOT NULL REFERENCES console_users (id),"
    " token TEXT NOT NULL,"
    " stage TEXT NOT NULL,"
    " created_at DOUBLE PRECISION NOT NULL,"
    " seen_at DOUBLE PRECISION NOT NULL)",
    "CREATE INDEX idx_console_sessions_user_id ON console_sessions (user_id)",
    "CREATE TABLE console_audit ("
    " id {id},"
    " at TEXT NOT NULL,"
    " user_name TEXT,"
    " address TEXT,"
    " action TEXT NOT NULL,"
    " detail TEXT NOT NULL DEFAULT '')",
    "CREATE INDEX idx_console_audit_at ON console_audit (at)",
    "ALTER TABLE orders ADD COLUMN cancelled_by_user BIGINT REFERENCES console_users (id)",
)
# The console's forms that show a secret once (a key made or rotated, a webhook's secret
# rotated), each taken by the key it carries when it is first sent, so that sending it
# again (a double click, a reload of the answer) makes nothing twice: the id of what it
# made (a key, an endpoint), once made; NULL while it is being applied. Forgotten with the
# sessions that could send them (migration 12).
CONSOLE_FORMS_SCHEMA = (
    "CREATE TABLE console_forms ("
    " form_key TEXT PRIMARY KEY,"
    " made_id BIGINT,"
    " created_at DOUBLE PRECISION NOT NULL)",
    "CREATE INDEX idx_console_forms_created_at ON console_forms (created_at)",
)
# D36 (migration 13): a user's throttle epoch, made anew by `petstore users unlock`, which
# the sign-in throttle's counters are keyed by, so that an unlock lifts them on every worker
# and host whatever the counters' storage; and a session's pending TOTP secret, the one its
# second factor page shows, kept here so that no form can name another.
CONSOLE_D36_SCHEMA = (
    "ALTER TABLE console_users ADD COLUMN throttle_epoch TEXT",
    "ALTER TABLE console_sessions ADD COLUMN pending_totp_secret TEXT",
)
# D38 (migration 14): a user's role, owner (everything) or staff (orders and stock); the users
# made before roles were are owners, as every user could do everything then.
CONSOLE_ROLES_SCHEMA = (
    "ALTER TABLE console_users ADD COLUMN role TEXT NOT NULL DEFAULT 'owner'"
    " CHECK (role IN ('owner', 'staff'))",
)
# D38 (migration 17): each user's recovery codes, ten at a time, which stand in for the
# authenticator's code when it is lost; kept as SHA-256 digests (why that digest:
# app/core/users/recovery.py), each spent once (used_at) and all replaced by a new set.
CONSOLE_RECOVERY_SCHEMA = (
    "CREATE TABLE console_recovery_codes ("
    " user_id BIGINT NOT NULL REFERENCES console_users (id),"
    " digest TEXT NOT NULL,"
    " created_at TEXT NOT NULL,"
    " used_at TEXT,"
    " PRIMARY KEY (user_id, digest))",
)
USER_COLUMNS = ("id, name, password_hash, must_change_password, totp_secret, totp_last_step, "
                "disabled_at, created_at, last_sign_in_at, throttle_epoch, role")
SESSION_COLUMNS = "digest, user_id, token, stage, created_at, seen_at, pending_totp_secret"
AUDIT_COLUMNS = "id, at, user_name, address, action, detail"
# What update_console_user may set, and nothing else.
USER_EDITABLE = frozenset({"password_hash", "must_change_password", "totp_secret",
                           "totp_last_step", "disabled_at", "last_sign_in_at",
                           "throttle_epoch"})


@dataclass(frozen=True)
class ConsoleUser:
    """A console user as stored: the password only as its argon2id hash; the TOTP secret
    (base32) once a second factor is enrolled, and the last time step it accepted; the
    throttle epoch of its last unlock (D36), None before any; its role (D38), owner or
    staff."""

    id: int
    name: str
    password_hash: str
    must_change_password: bool
    totp_secret: str | None
    totp_last_step: int | None
    disabled_at: str | None
    created_at: str
    last_sign_in_at: str | None
    throttle_epoch: str | None = None
    role: str = "staff"

    @property
    def active(self) -> bool:
        return self.disabled_at is None


@dataclass(frozen=True)
class ConsoleSession:
    """A console session as stored: the digest of its id, its user, its synchronizer token,
    its stage (app.core.users.sessions), when it began and was last seen (Unix times), and
    the TOTP secret its second factor page offers, once shown (D36)."""

    digest: str
    user_id: int
    token: str
    stage: str
    created_at: float
    seen_at: float
    pending_totp_secret: str | None = None


@dataclass(frozen=True)
class AuditEntry:
    """One line of the console's audit log: when, who (None before a sign-in names
    anyone), from which address, what, and about what."""

    id: int
    at: str
    user_name: str | None
    address: str | None
    action: str
    detail: str


@dataclass(frozen=True)
class RecoveryUse:
    """A recovery code offered (D38): whether it was spent now; if not, whether it had been
    spent before (else it was never one of the user's); and how many the user has left."""

    spent: bool
    spent_before: bool
    left: int


def user_of(row: Sequence[Any]) -> ConsoleUser:
    values = list(row)
    values[3] = bool(values[3])
    return ConsoleUser(*values)


def session_of(row: Sequence[Any]) -> ConsoleSession:
    digest, user_id, token, stage, created_at, seen_at, pending = row
    return ConsoleSession(digest, int(user_id), token, stage, float(created_at),
                          float(seen_at), pending)


class ConsoleStore(Protocol):
    """What the console's rules need from a store (D35); the Store protocol includes it."""

    def create_console_user(self, name: str, password_hash: str, now: str,
                            role: str = "staff") -> ConsoleUser:
        """Store a new user of this role (D38), who must change the password at first
        sign-in; raises DuplicateUser when the name is taken."""
        ...

    def console_user(self, name: str) -> ConsoleUser | None:
        """The user with this name, or None."""
        ...

    def console_user_by_id(self, user_id: int) -> ConsoleUser | None:
        """The user with this id, or None."""
        ...

    def list_console_users(self) -> list[ConsoleUser]:
        """Every user, by name."""
        ...

    def update_console_user(self, user_id: int, changes: dict[str, Any]) -> ConsoleUser | None:
        """Set some of the user's fields (USER_EDITABLE); the user as now, or None."""
        ...

    def disable_console_user(self, user_id: int, now: str) -> ConsoleUser | None:
        """Disable the user (a disabled one keeps its first time), unless that leaves no
        enabled owner (D38); the user as now, or None (no such user, or the last enabled
        owner)."""
        ...

    def use_totp_step(self, user_id: int, step: int) -> bool:
        """Record a TOTP time step as used, if it is later than the last one used (a code
        is good once, RFC 6238 section 5.2); whether it was."""
        ...

    def replace_recovery_codes(self, user_id: int, digests: Sequence[str], now: str) -> None:
        """Forget every recovery code of the user and keep these digests in their place,
        in one transaction (none: the user has none left)."""
        ...

    def use_recovery_code(self, user_id: int, digest: str, now: str) -> RecoveryUse:
        """Spend the user's recovery code of this digest, if it is one not spent yet;
        what happened, and how many the user has left."""
        ...

    def recovery_codes_left(self, user_id: int) -> int:
        """How many recovery codes the user has not spent."""
        ...

    def create_console_session(self, session: ConsoleSession,
                               replacing: str | None = None) -> None:
        """Store a new session; with replacing, end that one in the same transaction (a
        new id at each step of signing in)."""
        ...

    def console_session(self, digest: str) -> tuple[ConsoleSession, ConsoleUser] | None:
        """The session with this digest and its user, or None."""
        ...

    def offer_totp_secret(self, digest: str, secret: str) -> str | None:
        """Keep this TOTP secret as the one the session's second factor page offers (D36),
        unless it keeps one already; the one it keeps (None: no such session)."""
        ...

    def touch_console_session(self, digest: str, seen_at: float) -> None:
        """Note that the session was seen at this time."""
        ...

    def end_console_sessions(self, *, digest: str | None = None,
                             user_id: int | None = None) -> int:
        """End one session (by digest) or every session of a user; how many ended."""
        ...

    def purge_console_sessions(self, idle_before: float, begun_before: float) -> int:
        """End the sessions last seen before idle_before or begun before begun_before."""
        ...

    def take_console_form(self, form_key: str, now: float) -> tuple[bool, int | None]:
        """Take a form by its key, unless it was taken before: whether this took it, and
        else the id of what it made (None while it is being applied)."""
        ...

    def settle_console_form(self, form_key: str, made_id: int) -> None:
        """Note the id of what a form taken made."""
        ...

    def release_console_form(self, form_key: str) -> None:
        """Let a form taken be sent again: its action was refused, nothing was made."""
        ...

    def add_audit_entry(self, at: str, user_name: str | None, address: str | None,
                        action: str, detail: str) -> None:
        """Add a line to the audit log."""
        ...

    def audit_entries(self, limit: int, before: int | None = None,
                      user_name: str | None = None,
                      action: str | None = None) -> list[AuditEntry]:
        """Up to limit lines of the audit log, newest first, before an entry's id; only a
        user's, only of an action, when named."""
        ...

    def audit_names(self) -> tuple[list[str], list[str]]:
        """The user names and the actions the audit log holds, each sorted, for its
        filters."""
        ...

    def purge_audit_entries(self, before: str) -> int:
        """Forget the audit lines written before this time; how many went."""
        ...

    def order_summary(self, shipped_from: str, shipped_to: str) -> dict[str, int]:
        """The home page's figures: pending orders, the units they hold, and the orders
        shipped with a shipDate in the UTC days from shipped_from's to shipped_to's
        (excluded)."""
        ...

    def pet_names(self, pet_ids: Sequence[int]) -> dict[int, str]:
        """The names of those of the pets that the store holds, by id."""
        ...



class ConsoleStatements:
    """The Store's console methods (D35), the same SQL in both databases. A store gives
    PARAM, _rows (a read), _write_rows (one write statement in a transaction of its own,
    returning the rows its RETURNING clause gives) and _write_batch (several in one)."""

    PARAM: ClassVar[str]

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def _write_rows(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def _write_batch(self, statements: Sequence[tuple[str, tuple[Any, ...]]]
                     ) -> list[list[tuple[Any, ...]]]:
        raise NotImplementedError

    # users ------------------------------------------------------------------------------

    def create_console_user(self, name: str, password_hash: str, now: str,
                            role: str = "staff") -> ConsoleUser:
        """Store a new user of this role (D38), who must change the password at first
        sign-in; raises DuplicateUser when the name is taken."""
        p = self.PARAM
        rows = self._write_rows(
            f"INSERT INTO console_users (name, password_hash, created_at, role) "
            f"SELECT {p}, {p}, {p}, {p} WHERE NOT EXISTS "
            f"(SELECT 1 FROM console_users WHERE name = {p}) RETURNING {USER_COLUMNS}",
            (name, password_hash, now, role, name))
        if not rows:
            raise DuplicateUser(name)
        return user_of(rows[0])

    def console_user(self, name: str) -> ConsoleUser | None:
        """The user with this name, or None."""
        rows = self._rows(f"SELECT {USER_COLUMNS} FROM console_users WHERE name = {self.PARAM}",
                          (name,))
        return user_of(rows[0]) if rows else None

    def console_user_by_id(self, user_id: int) -> ConsoleUser | None:
        """The user with this id, or None."""
        rows = self._rows(f"SELECT {USER_COLUMNS} FROM console_users WHERE id = {self.PARAM}",
                          (user_id,))
        return user_of(rows[0]) if rows else None

    def list_console_users(self) -> list[ConsoleUser]:
        """Every user, by name."""
        return [user_of(row) for row in
                self._rows(f"SELECT {USER_COLUMNS} FROM console_users ORDER BY name")]

    def update_console_user(self, user_id: int, changes: dict[str, Any]) -> ConsoleUser | None:
        """Set some of the user's fields (USER_EDITABLE); the user as now, or None."""
        unknown = set(changes) - USER_EDITABLE
        if unknown:
            raise ValueError(f"not editable: {', '.join(sorted(unknown))}")
        stored = {name: int(value) if isinstance(value, bool) else value
                  for name, value in changes.items()}
        if not stored:
            return self.console_user_by_id(user_id)
        assignments = ", ".join(f"{name} = {self.PARAM}" for name in stored)
        rows = self._write_rows(
            f"UPDATE console_users SET {assignments} WHERE id = {self.PARAM} "
            f"RETURNING {USER_COLUMNS}", (*stored.values(), user_id))
        return user_of(rows[0]) if rows else None

    def disable_console_user(self, user_id: int, now: str) -> ConsoleUser | None:
        """Disable the user (a disabled one keeps its first time), unless that leaves no
        enabled owner (D38); the user as now, or None (no such user, or the last enabled
        owner). The first statement takes the enabled owners' rows for the transaction
        (an update that changes nothing: the same SQL in both databases, where SELECT ...
        FOR UPDATE is PostgreSQL's alone), so that two owners disabling each other at
        once are taken in turn, and the second finds itself the last."""
        p = self.PARAM
        _, rows = self._write_batch([
            ("UPDATE console_users SET role = role WHERE role = 'owner' AND disabled_at IS "
             "NULL RETURNING id", ()),
            (f"UPDATE console_users SET disabled_at = COALESCE(disabled_at, {p}) "
             f"WHERE id = {p} AND (role <> 'owner' OR disabled_at IS NOT NULL OR EXISTS "
             "(SELECT 1 FROM console_users o WHERE o.role = 'owner' AND o.disabled_at IS "
             f"NULL AND o.id <> {p})) RETURNING {USER_COLUMNS}", (now, user_id, user_id))])
        return user_of(rows[0]) if rows else None

    def use_totp_step(self, user_id: int, step: int) -> bool:
        """Record a TOTP time step as used, if it is later than the last one used (a code
        is good once, RFC 6238 section 5.2); whether it was. One conditional write, so of
        two sign-ins with the same code, one passes."""
        p = self.PARAM
        return bool(self._write_rows(
            f"UPDATE console_users SET totp_last_step = {p} WHERE id = {p} "
            f"AND (totp_last_step IS NULL OR totp_last_step < {p}) RETURNING id",
            (step, user_id, step)))

    # recovery codes (D38) ----------------------------------------------------------------

    def replace_recovery_codes(self, user_id: int, digests: Sequence[str], now: str) -> None:
        """Forget every recovery code of the user and keep these digests in their place,
        in one transaction, so that no moment has both sets or neither (none: the user
        has none left)."""
        p = self.PARAM
        statements: list[tuple[str, tuple[Any, ...]]] = [
            (f"DELETE FROM console_recovery_codes WHERE user_id = {p} RETURNING user_id",
             (user_id,))]
        if digests:
            rows = ", ".join([f"({p}, {p}, {p})"] * len(digests))
            statements.append((
                f"INSERT INTO console_recovery_codes (user_id, digest, created_at) "
                f"VALUES {rows} RETURNING user_id",
                tuple(value for digest in digests for value in (user_id, digest, now))))
        self._write_batch(statements)

    def use_recovery_code(self, user_id: int, digest: str, now: str) -> RecoveryUse:
        """Spend the user's recovery code of this digest, if it is one not spent yet: one
        conditional write, so that of two sign-ins with the same code one passes; what
        happened, and how many the user has left."""
        p = self.PARAM
        before, spent, left = self._write_batch([
            (f"SELECT used_at FROM console_recovery_codes WHERE user_id = {p} "
             f"AND digest = {p}", (user_id, digest)),
            (f"UPDATE console_recovery_codes SET used_at = {p} WHERE user_id = {p} "
             f"AND digest = {p} AND used_at IS NULL RETURNING digest", (now, user_id, digest)),
            (f"SELECT count(*) FROM console_recovery_codes WHERE user_id = {p} "
             "AND used_at IS NULL", (user_id,))])
        return RecoveryUse(bool(spent), not spent and bool(before), int(left[0][0]))

    def recovery_codes_left(self, user_id: int) -> int:
        """How many recovery codes the user has not spent."""
        return int(self._rows(f"SELECT count(*) FROM console_recovery_codes WHERE user_id = "
                              f"{self.PARAM} AND used_at IS NULL", (user_id,))[0][0])

    # sessions ---------------------------------------------------------------------------

    def create_console_session(self, session: ConsoleSession,
                               replacing: str | None = None) -> None:
        """Store a new session; with replacing, end that one in the same transaction (a
        new id at each step of signing in)."""
        p = self.PARAM
        statements: list[tuple[str, tuple[Any, ...]]] = []
        if replacing is not None:
            statements.append((f"DELETE FROM console_sessions WHERE digest = {p} "
                               "RETURNING digest", (replacing,)))
        statements.append((
            f"INSERT INTO console_sessions ({SESSION_COLUMNS}) VALUES ({p}, {p}, {p}, {p}, "
            f"{p}, {p}, {p}) RETURNING digest",
            (session.digest, session.user_id, session.token, session.stage,
             session.created_at, session.seen_at, session.pending_totp_secret)))
        self._write_batch(statements)

    def console_session(self, digest: str) -> tuple[ConsoleSession, ConsoleUser] | None:
        """The session with this digest and its user, or None."""
        columns = ", ".join(f"s.{c.strip()}" for c in SESSION_COLUMNS.split(","))
        users = ", ".join(f"u.{c.strip()}" for c in USER_COLUMNS.split(","))
        rows = self._rows(f"SELECT {columns}, {users} FROM console_sessions s JOIN "
                          f"console_users u ON u.id = s.user_id WHERE s.digest = {self.PARAM}",
                          (digest,))
        if not rows:
            return None
        width = len(SESSION_COLUMNS.split(","))
        return session_of(rows[0][:width]), user_of(rows[0][width:])

    def offer_totp_secret(self, digest: str, secret: str) -> str | None:
        """Keep this TOTP secret as the one the session's second factor page offers (D36),
        unless it keeps one already; the one it keeps (None: no such session). One write,
        so that of two pages shown at once both offer the secret kept."""
        p = self.PARAM
        rows = self._write_rows(
            "UPDATE console_sessions SET pending_totp_secret = "
            f"COALESCE(pending_totp_secret, {p}) WHERE digest = {p} "
            "RETURNING pending_totp_secret", (secret, digest))
        return str(rows[0][0]) if rows else None

    def touch_console_session(self, digest: str, seen_at: float) -> None:
        """Note that the session was seen at this time."""
        p = self.PARAM
        self._write_rows(f"UPDATE console_sessions SET seen_at = {p} WHERE digest = {p} "
                         "RETURNING digest", (seen_at, digest))

    def end_console_sessions(self, *, digest: str | None = None,
                             user_id: int | None = None) -> int:
        """End one session (by digest) or every session of a user; how many ended."""
        column, value = ("digest", digest) if digest is not None else ("user_id", user_id)
        return len(self._write_rows(f"DELETE FROM console_sessions WHERE {column} = "
                                    f"{self.PARAM} RETURNING digest", (value,)))

    def purge_console_sessions(self, idle_before: float, begun_before: float) -> int:
        """End the sessions last seen before idle_before or begun before begun_before, and
        forget the forms taken before begun_before, which no session left can send."""
        p = self.PARAM
        ended, _ = self._write_batch([
            (f"DELETE FROM console_sessions WHERE seen_at < {p} OR created_at < {p} "
             "RETURNING digest", (idle_before, begun_before)),
            (f"DELETE FROM console_forms WHERE created_at < {p} RETURNING form_key",
             (begun_before,))])
        return len(ended)

    # forms that show a secret once --------------------------------------------------------

    def take_console_form(self, form_key: str, now: float) -> tuple[bool, int | None]:
        """Take a form by its key, unless it was taken before: whether this took it, and
        else the id of what it made (None while it is being applied). The primary key
        decides between two sendings at once, on any worker or host."""
        p = self.PARAM
        if self._write_rows(f"INSERT INTO console_forms (form_key, created_at) VALUES "
                            f"({p}, {p}) ON CONFLICT (form_key) DO NOTHING RETURNING form_key",
                            (form_key, now)):
            return True, None
        rows = self._rows(f"SELECT made_id FROM console_forms WHERE form_key = {p}",
                          (form_key,))
        made = rows[0][0] if rows else None
        return False, None if made is None else int(made)

    def settle_console_form(self, form_key: str, made_id: int) -> None:
        """Note the id of what a form taken made."""
        p = self.PARAM
        self._write_rows(f"UPDATE console_forms SET made_id = {p} WHERE form_key = {p} "
                         "RETURNING form_key", (made_id, form_key))

    def release_console_form(self, form_key: str) -> None:
        """Let a form taken be sent again: its action was refused, nothing was made."""
        self._write_rows(f"DELETE FROM console_forms WHERE form_key = {self.PARAM} "
                         "AND made_id IS NULL RETURNING form_key", (form_key,))

    # the audit log ----------------------------------------------------------------------

    def add_audit_entry(self, at: str, user_name: str | None, address: str | None,
                        action: str, detail: str) -> None:
        """Add a line to the audit log."""
        p = self.PARAM
        self._write_rows(f"INSERT INTO console_audit (at, user_name, address, action, detail) "
                         f"VALUES ({p}, {p}, {p}, {p}, {p}) RETURNING id",
                         (at, user_name, address, action, detail))

    def audit_entries(self, limit: int, before: int | None = None,
                      user_name: str | None = None,
                      action: str | None = None) -> list[AuditEntry]:
        """Up to limit lines of the audit log, newest first, before an entry's id; only a
        user's, only of an action, when named."""
        p = self.PARAM
        conditions, params = [], list[Any]()
        for column, value in (("id <", before), ("user_name =", user_name),
                              ("action =", action)):
            if value is not None:
                conditions.append(f"{column} {p}")
                params.append(value)
        where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
        rows = self._rows(f"SELECT {AUDIT_COLUMNS} FROM console_audit{where} "
                          f"ORDER BY id DESC LIMIT {p}", (*params, limit))
        return [AuditEntry(*row) for row in rows]

    def audit_names(self) -> tuple[list[str], list[str]]:
        """The user names and the actions the audit log holds, each sorted, for its
        filters (the log keeps PETSTORE_CONSOLE_AUDIT_DAYS of a shop's console: small)."""
        users = self._rows("SELECT DISTINCT user_name FROM console_audit "
                           "WHERE user_name IS NOT NULL ORDER BY user_name")
        actions = self._rows("SELECT DISTINCT action FROM console_audit ORDER BY action")
        return [row[0] for row in users], [row[0] for row in actions]

    def purge_audit_entries(self, before: str) -> int:
        """Forget the audit lines written before this time; how many went."""
        return len(self._write_rows(f"DELETE FROM console_audit WHERE at < {self.PARAM} "
                                    "RETURNING id", (before,)))

    # the home page -----------------------------------------------------------------------

    def order_summary(self, shipped_from: str, shipped_to: str) -> dict[str, int]:
        """The home page's figures: pending orders and the units they hold, as the
        revision's row keeps them, and the orders shipped with a shipDate in the UTC days
        from shipped_from's to shipped_to's (excluded), as order_days keeps them
        (day_statements.py, D34): never a count over the orders."""
        p = self.PARAM
        pending, units = self._rows("SELECT pending_orders, pending_units FROM revision")[0]
        shipped = self._rows(f"SELECT coalesce(sum(orders_shipped), 0) FROM order_days "
                             f"WHERE day >= {p} AND day < {p}",
                             (shipped_from[:10], shipped_to[:10]))[0][0]
        return {"pending": int(pending), "units": int(units), "shipped_today": int(shipped)}

    def pet_names(self, pet_ids: Sequence[int]) -> dict[int, str]:
        """The names of those of the pets that the store holds, by id: one query for a
        page's pets (at most 500 ids a query, under either database's parameter limit)."""
        names: dict[int, str] = {}
        ids = sorted(set(pet_ids))
        for start in range(0, len(ids), 500):
            chunk = tuple(ids[start:start + 500])
            marks = ", ".join([self.PARAM] * len(chunk))
            names.update((int(pet_id), str(name)) for pet_id, name in self._rows(
                f"SELECT id, name FROM pets WHERE id IN ({marks})", chunk))
        return names
