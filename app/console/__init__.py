"""The shop owner's console (D35): server-rendered pages at /console/, a Flask blueprint in
the service's own Flask app, over the same core rules as the API.

- blueprint.py: the blueprint, what the running console holds, and how a page is rendered;
- guard.py: what every request passes first: the Host (D36), the address allow-list, the
  session, the origin check and the synchronizer token of every POST, and the stage and
  the role a page needs (each route's one declaration, blueprint.needs: D38);
- inputs.py: what the console takes of a request's text (no NUL, whichever the store);
- times.py: a moment as a page shows it (a <time> element, UTC until the browser's
  script writes it in the browser's zone);
- auth.py: signing in (password, then the authenticator's code or a recovery code), the
  first password change and the second factor offered after it, enrolling, replacing or
  removing a second factor, its recovery codes, signing out;
- checks.py: every check of a password or a code, throttled alike, and the password (and
  code) asked again before a secret is given or a second factor changes (D36);
- board.py: the orders board (v2's filters, sorts and pages), its actions, the CSV export
  and the changes the board's script follows;
- order_page.py: an order's page (its fields, its pet, its story, its actions) and the
  search box that finds one by its id;
- catalogue.py: the pets and their stock: the list, adding, editing, receiving and
  writing off stock, withdrawing, restoring a pet withdrawn;
- api_keys.py: the API keys: the list, making, rotating, revoking, lifting a ban;
- hooks.py: the webhook endpoints: their state and lag, adding, editing and deleting one,
  deliveries, a test message, enabling, disabling, rotating a secret, replaying;
- users.py: the console's users (D38), for owners: the list, adding one (its one-time
  password shown once), disabling and enabling, resetting a second factor;
- confirm.py: the confirmation pages before an act that cannot be undone (cancel an
  order, revoke a key, withdraw a pet, delete a webhook endpoint, disable a user), each
  holding the act's form;
- home.py: the home page and the audit log;
- errors.py: every error as a page;
- pages.py: register(), which puts them together on a Flask app.

The layer that routes /console/ here, past the API's keys, quotas and JSON errors, and that
adds the security headers is app/web/console.py.
"""
