"""Console users (D35): who may open the owner's console, and how they prove it.

- passwords.py: argon2id hashes (argon2-cffi), the rules a new password must pass (12 to
  128 characters, any Unicode, not on the bundled list of common passwords), one-time
  passwords;
- accounts.py: users (made, listed, disabled, their passwords reset by the CLI), signing
  in with a password and a second factor (TOTP, RFC 6238, pyotp), and the audit log;
- sessions.py: sessions kept in the database as digests, their stages, timeouts and
  synchronizer tokens;
- throttle.py: failed sign-ins counted per account and per address in the quotas'
  storage (the `limits` library).

Nothing here knows HTTP: the console's pages (app/console) and the CLI's `users` stand on
these rules.
"""
