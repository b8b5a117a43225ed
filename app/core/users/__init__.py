"""Console users (D35): who may open the owner's console, and how they prove it.

- passwords.py: argon2id hashes (argon2-cffi), the rules a new password must pass (12 to
  128 characters, any Unicode, not on the bundled list of common passwords, not built of
  the user's or the shop's name, zxcvbn's score at least 3: D36), one-time passwords;
- accounts.py: users (made, listed, disabled, their passwords reset and their locks lifted
  by the CLI), signing in with a password and a second factor (TOTP, RFC 6238, pyotp),
  which changes only with the password and the current code, and the audit log;
- recovery.py: the ten single-use recovery codes that stand in for a lost authenticator's
  code (D38), kept as digests;
- sessions.py: sessions kept in the database as digests, their stages, timeouts and
  synchronizer tokens;
- throttle.py: failed password and code checks counted per name from one address, and
  per name alone, in the quotas' storage (the `limits` library), by the user's throttle
  epoch (D36).

Nothing here knows HTTP: the console's pages (app/console) and the CLI's `users` stand on
these rules.
"""
