"""Cookies: a bookie refuses to start on directories that are not the ones it was created with.

The cookie (BookKeeper's Cookie) is ``"5\\n"`` + a text-format ``CookieFormat`` naming the bookie, its journal
and ledger directories and the cluster's instance id. The same cookie is written to
``<dir>/current/VERSION`` of every journal, ledger and index directory, and (issue "bookie server") to
ZooKeeper ``/ledgers/cookies/<bookieId>``. A wiped, swapped or foreign directory shows as a missing
or different cookie, and starting on it would silently lose acknowledged entries.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from bookie.exceptions import CookieException
from bookie.meta.metadata_store import Versioned

COOKIE_VERSION = 5
COOKIE_FILE = "VERSION"


@dataclass(frozen=True)
class Cookie:
    bookie_host: str
    journal_dirs: tuple[str, ...]
    ledger_dirs: tuple[str, ...]
    instance_id: str | None = None
    index_dirs: tuple[str, ...] | None = None

    def encode(self) -> str:
        def dir_list(dirs) -> str:
            return "\t".join([str(len(dirs)), *dirs])

        # As BookKeeper's Cookie.generateCookie: journal directories comma-joined, ledger and index directories
        # as encodeDirPaths (their count, then each, tab-separated).
        lines = [str(COOKIE_VERSION), f'bookieHost: "{self.bookie_host}"',
                 f'journalDir: "{",".join(self.journal_dirs)}"', f'ledgerDirs: "{dir_list(self.ledger_dirs)}"']
        if self.instance_id:
            lines.append(f'instanceId: "{self.instance_id}"')
        if self.index_dirs:
            lines.append(f'indexDirs: "{dir_list(self.index_dirs)}"')
        return "\n".join(lines) + "\n"

    @classmethod
    def decode(cls, text: str, source: str) -> "Cookie":
        lines = text.splitlines()
        if not lines or lines[0].strip() != str(COOKIE_VERSION):
            raise CookieException(f"{source}: not a version-{COOKIE_VERSION} cookie")
        fields: dict[str, str] = {}
        for line in lines[1:]:
            if ":" in line:
                key, value = line.split(":", 1)
                fields[key.strip()] = value.strip().strip('"').encode().decode("unicode_escape")

        def dirs(key: str) -> tuple[str, ...] | None:
            if key not in fields:
                return None
            parts = fields[key].split("\t")
            if len(parts) > 1 and parts[0].isdigit():  # encodeDirPaths (journal directories too, in older cookies)
                return tuple(parts[1:])
            return tuple(p for p in fields[key].split(",") if p) if key == "journalDir" else tuple(parts)

        if "bookieHost" not in fields:
            raise CookieException(f"{source}: cookie has no bookieHost")
        return cls(fields["bookieHost"], dirs("journalDir") or (), dirs("ledgerDirs") or (),
                   fields.get("instanceId"), dirs("indexDirs"))

    def mismatch(self, other: "Cookie", superset: bool = False) -> str | None:
        """What differs from ``other`` (the expected cookie), or None (Cookie.verify). ``superset``: ``other``'s
        ledger and index directories may add to this cookie's (Cookie.verifyIsSuperSet: storage expansion)."""
        checks = [("bookie id", self.bookie_host, other.bookie_host, False),
                  ("journal directories", self.journal_dirs, other.journal_dirs, False),
                  ("ledger directories", self.ledger_dirs, other.ledger_dirs, superset),
                  ("index directories", self.index_dirs or self.ledger_dirs, other.index_dirs or other.ledger_dirs,
                   superset)]
        if self.instance_id and other.instance_id:
            checks.append(("cluster instance id", self.instance_id, other.instance_id, False))
        for what, found, expected, grows in checks:
            if (not set(found) <= set(expected)) if grows else found != expected:
                return f"{what}: cookie says {found}, this bookie is configured with {expected}"
        return None


def cookie_path(directory: str) -> str:
    return os.path.join(directory, "current", COOKIE_FILE)


def read_cookie(directory: str) -> Cookie | None:
    try:
        with open(cookie_path(directory), encoding="utf-8") as f:
            return Cookie.decode(f.read(), cookie_path(directory))
    except FileNotFoundError:
        return None


def write_cookie(directory: str, cookie: Cookie) -> None:
    path = cookie_path(directory)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(cookie.encode())
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_registered_cookie(store, bookie_id: str) -> Versioned[Cookie] | None:
    """The bookie's cookie in the metadata store (Cookie.readFromRegistrationManager), decoded."""
    found = store.read_cookie(bookie_id)
    if found is None:
        return None
    return Versioned(Cookie.decode(found.value.decode(), store.cookie_location(bookie_id)), found.version)


def write_registered_cookie(store, bookie_id: str, cookie: Cookie, version: int | None) -> None:
    """Create (``version`` None) or CAS-update the bookie's cookie in the metadata store."""
    store.write_cookie(bookie_id, cookie.encode().encode(), version)


def _has_data(directory: str) -> bool:
    current = os.path.join(directory, "current")
    return os.path.isdir(current) and any(n != COOKIE_FILE for n in os.listdir(current))


def cookie_dirs(conf) -> list[str]:
    """Every directory that holds the bookie's cookie: journal, ledger and index directories, each once."""
    return list(dict.fromkeys([*conf.journal_dirs, *conf.ledger_dirs, *conf.index_dirs]))


def expected_cookie(conf, instance_id: str | None = None) -> Cookie:
    index = tuple(conf.index_dirs) if conf["indexDirectories"] else None
    return Cookie(conf.bookie_id, tuple(conf.journal_dirs), tuple(conf.ledger_dirs), instance_id, index)


def check_cookies(conf, instance_id: str | None = None, registered: Cookie | None = None) -> Cookie:
    """Validate (or, for a brand-new bookie, write) the cookies of every directory.

    ``registered`` is the cookie found in the metadata store, if any. Raises CookieException naming
    the directory and what is wrong, and what the operator can do about it.
    """
    expected = expected_cookie(conf, instance_id)
    found = {d: read_cookie(d) for d in cookie_dirs(conf)}
    present = {d: c for d, c in found.items() if c is not None}
    if registered is not None and instance_id and registered.instance_id and registered.instance_id != instance_id:
        raise CookieException(f"the cookie of bookie {expected.bookie_host} in the metadata store is for cluster "
                              f"{registered.instance_id}, this cluster is {instance_id}")
    if registered is not None and (problem := registered.mismatch(expected)):
        raise CookieException(f"cookie of bookie {expected.bookie_host} in the metadata store does not match: {problem}. "
                              "Restore the original directories, or update the cookie (bk shell updatecookie) if the "
                              "change is intended.")
    for d, cookie in present.items():
        problem = cookie.mismatch(expected)
        if problem:
            raise CookieException(f"directory {d} belongs to another bookie or layout ({problem}). Check the "
                                  "journalDirectories/ledgerDirectories settings and that the disks are mounted "
                                  "where they were.")
    missing = [d for d, c in found.items() if c is None]
    if missing and (present or registered is not None):
        raise CookieException(
            f"directories {', '.join(missing)} have no cookie while this bookie has been started before "
            "(other directories or the metadata store have its cookie): they were wiped, replaced or newly added. "
            "Starting would lose acknowledged entries. Restore the data, or decommission the bookie and format it "
            "with its cookie (bk shell bookieformat -deleteCookie) to start it empty.")
    if missing:
        with_data = [d for d in missing if _has_data(d)]
        if with_data:
            raise CookieException(f"directories {', '.join(with_data)} hold bookie data but no cookie: refusing "
                                  "to adopt them. Format them (bk shell bookieformat) if the data is not needed.")
        for d in missing:
            write_cookie(d, expected)
    return expected
