"""The users page (D38): every console user with its role, whether it may sign in, its
second factor and its last sign-in; an owner adds a user (its one-time password shown
once), disables one (after a confirmation page, confirm.py) or enables it again, and
removes another's second factor (an authenticator lost) after giving the password again.

Each act is the core's rule (app.core.users.accounts), the CLI's `petstore users`: no
owner disables their own account or the last enabled owner, and a disabled user's sessions
end at once, on every worker and host. The form that adds a user is applied once for the
key it carries (blueprint.once), as a key's: sent again (a double click, a reload of its
answer), it adds no second user, but gives the one it added a new one-time password in
place of the one the earlier answer showed, and says so (while that user has not signed in
yet). Adding a user and resetting a second factor ask for the owner's password again
(ASVS 3.7.1), counted by the sign-in throttle when wrong (app.console.checks, D36). Every
act and every refusal goes to the audit log, with the owner's name; no password does.
"""

from __future__ import annotations

import flask

from app.console import checks
from app.console.blueprint import (
    OWNER,
    Page,
    address,
    console,
    needs,
    notice,
    once,
    path_id,
    query_id,
    render,
    store,
    visitor,
)
from app.core.errors import DuplicateUser, InvalidRole, InvalidUserName, UserRefused
from app.core.storage.console_statements import ConsoleUser
from app.core.users import accounts

SECRET_HEADERS = {"Cache-Control": "no-store"}  # a page with a password is never kept


def _owner() -> ConsoleUser:
    _, user = visitor()
    assert user is not None
    return user


def find(user_id: str) -> ConsoleUser:
    """The user of a page's path; 404 for an id that is no user's."""
    number = path_id(user_id)
    found = store().console_user_by_id(number)
    if found is None:
        flask.abort(404, description=f"No console user has the id {number}.")
    return found


def _notice() -> tuple[str, str] | None:
    """What the last act did, from the redirect's words (known words only), naming the
    user by its id as the store holds it now."""
    number = query_id("user")
    found = store().console_user_by_id(number) if number is not None else None
    if found is None:
        return None
    return notice({"disabled": f"{found.name} is disabled: their sessions have ended, and "
                               "they cannot sign in.",
                   "enabled": f"{found.name} may sign in again.",
                   "reset": f"{found.name}'s second factor is removed: they sign in with "
                            "the password alone until they set one up again."})


def _list(status: int = 200, error: str | None = None, form: dict[str, str] | None = None,
          headers: dict[str, str] | None = None) -> Page:
    return render("users.html", status, headers, users=store().list_console_users(),
                  roles=accounts.ROLES, form=form or {"role": accounts.STAFF}, error=error,
                  notice=_notice())


@console.route("/users")
@needs(OWNER)
def users_page() -> Page:
    """Every user, and the form that adds one."""
    return _list()


@console.route("/users", methods=["POST"])
@needs(OWNER)
def add_user() -> Page:
    """Add a user of the role chosen, and show its one-time password, once."""
    owner = _owner()
    form = flask.request.form
    kept = {"name": form.get("name", ""), "role": form.get("role", "")}
    refused = checks.reauthenticate(owner, "add user")
    if refused is not None:
        return _list(refused.status, refused.message, kept, refused.headers)
    with once(form, flask.url_for("console.users_page")) as sending:
        if sending.before is not None:
            return _added_again(sending.before)
        name = kept["name"].strip()
        try:
            made, one_time = accounts.add(store(), name, accounts.check_role(kept["role"]),
                                          owner.name, address())
        except (InvalidUserName, InvalidRole, DuplicateUser) as exc:
            accounts.record(store(), owner.name, address(), "add user refused",
                            f"{name[:64]}: {exc.message}")
            return _list(409 if isinstance(exc, DuplicateUser) else 400, exc.message, kept)
        sending.made = made.id
    return render("user_password.html", 200, SECRET_HEADERS, added=made, password=one_time)


def _added_again(number: int) -> Page:
    """The form that added user number, sent again: a new one-time password in place of the
    one its earlier answer showed, while the user has not chosen its own yet."""
    found = store().console_user_by_id(number)
    if found is None:
        flask.abort(404, description=f"No console user has the id {number}.")
    if not found.must_change_password:
        return _list(409, f"This form added {found.name} before, who has chosen a password "
                          "since: nothing was done.")
    one_time = accounts.reset_password(store(), found.name, by=_owner().name,
                                       address=address())
    return render("user_password.html", 200, SECRET_HEADERS, added=found, password=one_time,
                  again=True)


@console.route("/users/<user_id>/disable", methods=["POST"])
@needs(OWNER)
def disable_user(user_id: str) -> Page:
    """Disable the user (again: nothing changes); its sessions end at once."""
    found = find(user_id)
    try:
        accounts.disable(store(), found.name, _owner().name, address())
    except UserRefused as exc:
        return _list(409, exc.message)
    return flask.redirect(flask.url_for("console.users_page", done="disabled",
                                        user=found.id), 303)


@console.route("/users/<user_id>/enable", methods=["POST"])
@needs(OWNER)
def enable_user(user_id: str) -> Page:
    """Let a disabled user sign in again."""
    found = find(user_id)
    accounts.enable(store(), found.name, _owner().name, address())
    return flask.redirect(flask.url_for("console.users_page", done="enabled",
                                        user=found.id), 303)


@console.route("/users/<user_id>/second-factor/reset", methods=["POST"])
@needs(OWNER)
def reset_second_factor(user_id: str) -> Page:
    """Remove another user's second factor, after the owner's own password; its sessions
    end."""
    found = find(user_id)
    owner = _owner()
    refused = checks.reauthenticate(owner, f"reset second factor of {found.name}")
    if refused is not None:
        return _list(refused.status, refused.message, headers=refused.headers)
    try:
        accounts.reset_second_factor(store(), found.name, owner.name, address())
    except UserRefused as exc:
        return _list(409, exc.message)
    return flask.redirect(flask.url_for("console.users_page", done="reset",
                                        user=found.id), 303)
