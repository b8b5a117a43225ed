"""What the SQLite and PostgreSQL stores say alike about the feed of changed pets (D39,
migration 18 of both): each pet's position, given by the database at every change of it
whoever makes it (as each order's is, D26), and the kind of that change, which a webhook
message names (pet.created, pet.withdrawn, ...). Each store's triggers use these; the
read is the Store's pet_changes."""

from __future__ import annotations

# D39 (migration 18): each pet's position in the feed of changes, on the (position, id)
# index a page is one range of, and the kind of its last change. The pets held before the
# feed are all at position 0, their kind "changed": a client that starts from the
# beginning gets them first. (A new pet's kind, "created", is written by each store's
# trigger.)
PET_FEED_SCHEMA = (
    "ALTER TABLE pets ADD COLUMN position BIGINT NOT NULL DEFAULT 0",
    "ALTER TABLE pets ADD COLUMN last_change TEXT NOT NULL DEFAULT 'changed'",
    "CREATE INDEX idx_pets_position ON pets (position, id)",
    # A webhook endpoint's place is in both feeds at once (webhook_statements): after the
    # orders of its position up to order_id ("order"), or after all of them and the pets
    # of its position up to that id ("pet").
    "ALTER TABLE webhook_endpoints ADD COLUMN place_of TEXT NOT NULL DEFAULT 'order'",
    # What each endpoint last read of each pet it read: whether it took orders and was
    # withdrawn then. A crossing (out of stock, back in stock, withdrawn, restored) is one
    # from that, as the deliverer reads the pet (webhooks.message_type): none is lost to a
    # later change made before the read, and none is reported that the endpoint did not
    # see both sides of.
    "CREATE TABLE webhook_pets_seen (endpoint_id BIGINT NOT NULL, pet_id BIGINT NOT NULL,"
    " was_orderable INTEGER NOT NULL, was_withdrawn INTEGER NOT NULL,"
    " PRIMARY KEY (endpoint_id, pet_id))",
)

# Whether a pet row takes new orders: not withdrawn, and its stock not tracked or above
# what its pending orders hold (PET_AVAILABLE's figure above 0).
_ORDERABLE = "(NOT {r}.withdrawn AND ({r}.stock IS NULL OR {r}.stock > {r}.reserved))"
ORDERABLE = _ORDERABLE.format(r="pets")  # the same, of a row of pets read

# The kind of a change of a pet from row OLD to row NEW, the first that holds (D39):
# withdrawn or restored; its available units crossing zero, either way (out_of_stock,
# back_in_stock); what the shop edits of it changed (name, category, tags, photos, or the
# stock alone: a receipt, a write-off; updated); anything else (changed): the units its
# orders hold moving without crossing zero (an order placed, cancelled, or shipped, which
# takes its units out of the stock and the reservation at once), an UPDATE that changes
# nothing a client reads.
PET_CHANGE_KIND = (
    "CASE WHEN NEW.withdrawn AND NOT OLD.withdrawn THEN 'withdrawn' "
    "WHEN OLD.withdrawn AND NOT NEW.withdrawn THEN 'restored' "
    f"WHEN {_ORDERABLE.format(r='OLD')} AND NOT {_ORDERABLE.format(r='NEW')} "
    "THEN 'out_of_stock' "
    f"WHEN {_ORDERABLE.format(r='NEW')} AND NOT {_ORDERABLE.format(r='OLD')} "
    "THEN 'back_in_stock' "
    "WHEN NEW.name IS DISTINCT FROM OLD.name OR NEW.category IS DISTINCT FROM OLD.category "
    "OR NEW.tags IS DISTINCT FROM OLD.tags OR NEW.photo_urls IS DISTINCT FROM OLD.photo_urls "
    "OR (NEW.stock IS DISTINCT FROM OLD.stock AND NEW.reserved = OLD.reserved) "
    "THEN 'updated' "
    "ELSE 'changed' END"
)
# The kinds a pet's change may have, as the webhooks name them after "pet.".
PET_CHANGE_KINDS = ("created", "updated", "withdrawn", "restored", "out_of_stock",
                    "back_in_stock", "changed")
