"""The catalogue and its stock (D32-D34): the pets with their stock, reserved, available and
status, filtered and paged as listPets is (app.core.pets.page: the API's own cursors);
adding a pet, editing one at the version its page showed (D25), receiving stock or writing
it off by a delta with a reason, withdrawing one and restoring one withdrawn.

Every action is the core's rule (app.core.pets), the API's and the CLI's: its refusals
(stock_below_reserved, stock_not_tracked, a pet changed meanwhile, ...) are the core's
sentences, shown on the form that was sent, with nothing changed. An addition and an
adjustment go under an idempotency key made for the form when it was shown (D23, D32), so
that a form sent twice (a double click, a resend after a lost answer) is applied once.
Every action, and every refusal, goes to the audit log.
"""

from __future__ import annotations

import re
from typing import Any

import flask
import orjson

from app.console.blueprint import (
    STAFF,
    Page,
    address,
    console,
    form_key,
    form_key_of,
    needs,
    notice,
    path_id,
    query_id,
    render,
    store,
    version_of,
    visitor,
)
from app.core import pets
from app.core.errors import (
    IdempotencyKeyInUse,
    IdempotencyKeyReused,
    InvalidParameter,
    PetNotFound,
    PetNotWithdrawn,
    PetstoreError,
    PreconditionFailed,
    StockBelowReserved,
    StockNotTracked,
)
from app.core.users import accounts

PAGE_SIZE = 100  # pets a page
# The fields as the forms label them, for the rules' sentences.
LABELS = {"name": "Name", "category": "Category", "tags": "Tags", "tag": "Tag",
          "photoUrls": "Photo URLs", "stock": "Stock", "delta": "Units",
          "reason": "Reason", "status": "Status", "direction": "What to do", "body": "The form"}
DIRECTIONS = ("receive", "write-off")  # the stock form's choices
# The refusals shown on the form that was sent (a 409: the pet's state refused it).
CONFLICTS = (StockBelowReserved, StockNotTracked, IdempotencyKeyReused, IdempotencyKeyInUse,
             PetNotWithdrawn)


def _sentence(exc: PetstoreError) -> str:
    """A refusal of the core, as a sentence for a person."""
    if isinstance(exc, InvalidParameter):
        return f"{LABELS.get(exc.name, exc.name)} {exc.message}"
    if isinstance(exc, IdempotencyKeyReused):
        return ("This form was sent before with other values, and was applied then; open "
                "the page again to send new ones.")
    if isinstance(exc, IdempotencyKeyInUse):
        return "This form is being applied already; look at the pet again in a moment."
    return exc.message


def _user_name() -> str:
    _, user = visitor()
    assert user is not None
    return user.name


def _record(action: str, detail: str) -> None:
    accounts.record(store(), _user_name(), address(), action, detail)


def _listed(text: str) -> list[str]:
    """Tags as the form holds them: separated by commas."""
    return [part.strip() for part in text.split(",") if part.strip()]


def _lines(text: str) -> list[str]:
    """Photo URLs as the form holds them: one a line."""
    return [line.strip() for line in text.splitlines() if line.strip()]


def _stock_of(text: str) -> int | str | None:
    """A stock as the form holds it: empty is not tracked; a whole number, else the text
    (which the rules refuse)."""
    text = text.strip()
    if not text:
        return None
    return int(text) if re.fullmatch(r"-?[0-9]{1,12}", text) else text


def _pet_body(form: Any) -> dict[str, Any]:
    """The pet a form describes, as addPet's body (a patch's, for an edit)."""
    return {"name": form.get("name", ""), "category": form.get("category", "").strip() or None,
            "tags": _listed(form.get("tags", "")), "photoUrls": _lines(form.get("photoUrls", "")),
            "stock": _stock_of(form.get("stock", ""))}


def _fields(pet: dict[str, Any]) -> dict[str, str]:
    """A pet as its edit form shows it."""
    return {"name": pet.get("name", ""), "category": pet.get("category") or "",
            "tags": ", ".join(pet.get("tags", [])),
            "photoUrls": "\n".join(pet.get("photoUrls", [])),
            "stock": "" if pet.get("stock") is None else str(pet["stock"])}


# the list ---------------------------------------------------------------------------------

def _filters(args: Any) -> tuple[dict[str, Any], pets.PetQuery | None, str | None]:
    """The list's filters as the form holds them, the query they make (None when the rules
    refuse one) and the refusal."""
    form = {"status": [s for value in args.getlist("status") for s in value.split(",") if s],
            "tag": args.get("tag", "").strip(), "category": args.get("category", "").strip()}
    try:
        query = pets.pet_query(status=form["status"], tag=_listed(form["tag"]),
                               category=form["category"] or None)
    except InvalidParameter as exc:
        return form, None, _sentence(exc)
    return form, query, None


def _notice() -> tuple[str, str] | None:
    """What the last action did, from the redirect's parameters (known words only)."""
    number = query_id("pet")
    if number is None:
        return None
    done = {"added": f"Pet {number} is added.", "edited": f"Pet {number} is saved.",
            "received": f"The stock of pet {number} is received.",
            "written-off": f"The stock of pet {number} is written off.",
            "replayed": f"That form had been applied already to pet {number}; it was not "
                        "applied again.",
            "withdrawn": f"Pet {number} is withdrawn from the catalogue; it takes no new "
                         "order.",
            "restored": f"Pet {number} is back in the catalogue; it takes orders again."}
    return notice(done)


@console.route("/pets")
@needs(STAFF)
def pets_page() -> Page:
    """One page of the catalogue, filtered as listPets is."""
    form, query, error = _filters(flask.request.args)
    kept = {name: value for name, value in form.items() if value}
    if query is None:
        return render("pets.html", 400, form=form, rows=[], statuses=pets.PET_STATUSES,
                      error=error, notice=None, kept=kept, first_page=True)
    cursor = flask.request.args.get("cursor") or None
    try:
        page = pets.page(store(), query, PAGE_SIZE, cursor)
    except InvalidParameter:
        flask.abort(400, description="This page's link is not one the catalogue made, or it "
                                     "was made for other filters; start from the first page.")
    rows = [orjson.loads(text) for text in page.pets]
    return render("pets.html", form=form, rows=rows, statuses=pets.PET_STATUSES,
                  error=None, notice=_notice(), kept=kept, next=page.next,
                  first_page=cursor is None)


# adding -------------------------------------------------------------------------------

@console.route("/pets/new")
@needs(STAFF)
def new_pet() -> Page:
    """The form that adds a pet."""
    return render("pet_new.html", fields=_fields({}), key=form_key(), error=None)


@console.route("/pets/new", methods=["POST"])
@needs(STAFF)
def add_pet() -> Page:
    """Add the pet the form describes, once for its key."""
    form = flask.request.form
    key = form_key_of(form)
    body = {name: value for name, value in _pet_body(form).items() if value not in (None, [])}
    try:
        written = pets.add(store(), body, pets.OPERATOR, key)
    except PetstoreError as exc:
        if not isinstance(exc, (InvalidParameter, *CONFLICTS)):
            raise
        _record("add pet refused", _sentence(exc))
        return render("pet_new.html", 409 if isinstance(exc, CONFLICTS) else 400,
                      fields={name: form.get(name, "") for name in _fields({})}, key=key,
                      error=_sentence(exc))
    pet_id = written.pet["id"]
    if not written.replayed:
        _record("pet added", f"pet {pet_id}: {written.pet['name']}")
    return flask.redirect(flask.url_for("console.pet_page", pet_id=pet_id,
                                        done="replayed" if written.replayed else "added",
                                        pet=pet_id), 303)


# one pet ----------------------------------------------------------------------------------

def _pet_view(pet_id: int, status: int = 200, error: str | None = None,
              fields: dict[str, str] | None = None, **context: Any) -> Page:
    """A pet's page: its figures, its edit form (the fields sent, after a refusal), the
    stock's form and the withdrawal's, at the version read now."""
    try:
        pet, version = pets.get_versioned(store(), pet_id)
    except PetNotFound:
        flask.abort(404, description=f"No pet has the id {pet_id}.")
    return render("pet.html", status, pet=pet, version=version,
                  fields=fields if fields is not None else _fields(pet),
                  key=form_key(), error=error, notice=_notice(), **context)


@console.route("/pets/<pet_id>")
@needs(STAFF)
def pet_page(pet_id: str) -> Page:
    """A pet, its figures and its actions."""
    return _pet_view(path_id(pet_id))


def _done(pet_id: int, done: str) -> Page:
    return flask.redirect(flask.url_for("console.pet_page", pet_id=pet_id, done=done,
                                        pet=pet_id), 303)


def _refused(pet_id: int, action: str, exc: PetstoreError, **context: Any) -> Page:
    """The pet's page again, saying why the action was refused; nothing changed."""
    if isinstance(exc, PetNotFound):
        flask.abort(404, description=exc.message)
    if not isinstance(exc, (InvalidParameter, PreconditionFailed, *CONFLICTS)):
        raise exc
    _record(f"{action} refused", f"pet {pet_id}: {_sentence(exc)}")
    status = 400 if isinstance(exc, InvalidParameter) else 409
    return _pet_view(pet_id, status, _sentence(exc), **context)


@console.route("/pets/<pet_id>/edit", methods=["POST"])
@needs(STAFF)
def edit_pet(pet_id: str) -> Page:
    """Save the edit form, only at the version the page showed (D25)."""
    number = path_id(pet_id)
    form = flask.request.form
    version = version_of(form, "pet")
    try:
        pets.update(store(), number, _pet_body(form), version)
    except PreconditionFailed:
        # The page comes back as the pet is now: what was sent is not kept over it.
        _record("edit pet refused", f"pet {number}: changed meanwhile")
        return _pet_view(number, 409, f"Pet {number} changed meanwhile; nothing was saved. "
                                      "The page shows it as it is now: look again before "
                                      "saving.")
    except PetstoreError as exc:
        return _refused(number, "edit pet", exc,
                        fields={name: form.get(name, "") for name in _fields({})})
    _record("pet edited", f"pet {number}")
    return _done(number, "edited")


@console.route("/pets/<pet_id>/stock", methods=["POST"])
@needs(STAFF)
def adjust_stock(pet_id: str) -> Page:
    """Receive stock (a positive delta) or write it off (a negative one), with a reason,
    once for the form's key."""
    number = path_id(pet_id)
    form = flask.request.form
    key = form_key_of(form)
    direction = form.get("direction", "")
    if direction not in DIRECTIONS:  # sideways, or none, is neither: refused, and recorded
        return _refused(number, "adjust stock",
                        InvalidParameter("direction", "enum", {"enum": DIRECTIONS}))
    units = form.get("units", "").strip()
    reason = form.get("reason", "").strip() or None
    delta: Any = int(units) if re.fullmatch(r"[0-9]{1,12}", units) else units
    if isinstance(delta, int) and direction == "write-off":
        delta = -delta
    try:
        written = pets.adjust(store(), number, delta, reason, pets.OPERATOR, key)
    except PetstoreError as exc:
        return _refused(number, "adjust stock", exc)
    if written.replayed:
        return _done(number, "replayed")
    _record("stock received" if delta > 0 else "stock written off",
            f"pet {number}: {delta:+d} ({reason or 'no reason given'})")
    return _done(number, "received" if delta > 0 else "written-off")


@console.route("/pets/<pet_id>/withdraw", methods=["POST"])
@needs(STAFF)
def withdraw_pet(pet_id: str) -> Page:
    """Withdraw the pet from the catalogue (again: nothing changes)."""
    number = path_id(pet_id)
    try:
        pets.withdraw(store(), number)
    except PetstoreError as exc:
        return _refused(number, "withdraw pet", exc)
    _record("pet withdrawn", f"pet {number}")
    return _done(number, "withdrawn")


@console.route("/pets/<pet_id>/restore", methods=["POST"])
@needs(STAFF)
def restore_pet(pet_id: str) -> Page:
    """Bring a withdrawn pet back into the catalogue, its stock and what its pending orders
    hold as they are now (app.core.pets.restore). No confirmation page: it takes nothing
    away, and withdrawing undoes it. A pet not withdrawn is refused (409), nothing
    changed."""
    number = path_id(pet_id)
    try:
        pets.restore(store(), number)
    except PetstoreError as exc:
        return _refused(number, "restore pet", exc)
    _record("pet restored", f"pet {number}")
    return _done(number, "restored")
