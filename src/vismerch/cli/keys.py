"""API keys for `vismerch serve`: create (the key is printed once), list, revoke.

    vismerch keys create STORE --role merchandiser [--expires 30d] [--name alice]
    vismerch keys list STORE [--json]
    vismerch keys revoke STORE KEY_ID

Keys need no settings, but each command resolves them like every other (so a bad --config
or VISMERCH_* value is reported here too).
"""

from __future__ import annotations

from typing import Annotated

import typer

from vismerch.cli.context import open_workspace
from vismerch.cli.output import JsonOpt, StoreArg, done, print_json, say, table

keys_app = typer.Typer(help="API keys for `vismerch serve` (roles: viewer, merchandiser, publisher, "
                            "admin; storefront reads published grids only).", no_args_is_help=True)


@keys_app.command("create")
def keys_create(
    store: StoreArg,
    role: Annotated[
        str, typer.Option("--role", help="viewer | merchandiser | publisher | admin | storefront")
    ],
    expires: Annotated[str | None, typer.Option("--expires", help="Lifetime, e.g. 30d, 12h, 90m, 2w "
                                                                  "(default: never expires).")] = None,
    name: Annotated[str | None, typer.Option("--name", help="Who or what the key is for.")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Make a key and print it once: only a salted hash of it is stored."""
    from vismerch.service import keys

    made = keys.create(open_workspace(store), role, expires=expires, name=name, record_as="cli")
    if json_out:
        print_json(made.as_dict())
        return
    key = made.key
    say(f"created {role} key {key.id}" + (f" (expires {key.expires_at})" if key.expires_at else ""))
    say("store it now, it is not shown again:")
    typer.echo(made.text)


@keys_app.command("list")
def keys_list(store: StoreArg, json_out: JsonOpt = False) -> None:
    """Every key with its role, expiry and revocation (never the secret)."""
    from vismerch.service import keys

    rows = [k.as_dict() for k in keys.list_keys(open_workspace(store))]
    if json_out:
        print_json(rows)
        return
    table("API keys", ["id", "role", "name", "created", "expires", "revoked", "active"],
          [[k["id"], k["role"], k["name"], k["created_at"], k["expires_at"], k["revoked_at"], k["active"]]
           for k in rows])


@keys_app.command("revoke")
def keys_revoke(store: StoreArg, key_id: Annotated[str, typer.Argument(help="Key id (see keys list).")],
                json_out: JsonOpt = False) -> None:
    """Revoke a key: the server refuses it (401) from the next request on."""
    from vismerch.service import keys

    key = keys.revoke(open_workspace(store), key_id, record_as="cli")
    done(key.as_dict(), json_out, f"revoked {key_id} at {key.revoked_at}")


def register(app: typer.Typer) -> None:
    app.add_typer(keys_app, name="keys")
