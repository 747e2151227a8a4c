"""Who may use the operator API: bearer tokens mapped to roles.

The tokens file (YAML or JSON) lists ``{name, role, token}`` or ``{name, role, token_file}``
entries; ``token_file`` suits a Kubernetes secret mounted as files. ``viewer`` reads,
``operator`` reads and writes. Tokens are compared in constant time against every entry.
Without a tokens file every request is refused, unless the deployment allows anonymous reads
(`operator_api.anonymous_reads`); there are no anonymous writes, ever.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

Role = Literal["viewer", "operator"]
RANK = {"viewer": 1, "operator": 2}


class TokensError(ValueError):
    """A tokens file that cannot be used; the message names the file and the entry."""


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=64)
    role: Role
    token: str | None = Field(default=None, min_length=16)
    token_file: Path | None = None

    @model_validator(mode="after")
    def _one_source(self) -> _Entry:
        if (self.token is None) == (self.token_file is None):
            raise ValueError("give token or token_file")
        return self


@dataclass(frozen=True)
class Caller:
    name: str
    role: Role

    def may(self, needed: Role) -> bool:
        return RANK[self.role] >= RANK[needed]


class Tokens:
    def __init__(
        self,
        entries: list[tuple[str, Caller]],
        sources: tuple[Path, ...] = (),
        refuse_all: bool = False,
    ) -> None:
        """``sources``: the files the tokens came from (watched for changes); ``refuse_all``:
        tokens are configured but none can be trusted (a tokens file that no longer reads)."""
        self._entries = [(token.encode(), caller) for token, caller in entries]
        self.sources = sources
        self._refuse_all = refuse_all

    @classmethod
    def refusing_all(cls, sources: tuple[Path, ...]) -> Tokens:
        return cls([], sources, refuse_all=True)

    def replace_with(self, other: Tokens) -> None:
        """Take ``other``'s tokens (a reload): requests checked from now on use them."""
        self._entries, self.sources, self._refuse_all = (
            other._entries,
            other.sources,
            other._refuse_all,
        )

    @property
    def count(self) -> int:
        return len(self._entries)

    @property
    def configured(self) -> bool:
        return bool(self._entries) or self._refuse_all

    def caller(self, token: str) -> Caller | None:
        """The caller a token belongs to; every entry is compared, in constant time each."""
        given = token.encode()
        found = None
        for known, caller in self._entries:
            if hmac.compare_digest(known, given) and found is None:
                found = caller
        return found


def load_tokens(path: Path | None) -> Tokens:
    if path is None:
        return Tokens([])
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise TokensError(f"{path}: cannot read the tokens file: {error}") from None
    if not isinstance(raw, list):
        raise TokensError(f"{path}: expected a list of {{name, role, token}} entries")
    entries = []
    sources = [path]
    for index, item in enumerate(raw):
        try:
            entry = _Entry.model_validate(item)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise TokensError(f"{path}: entry {index}: {where}: {first['msg']}") from None
        token = entry.token
        if entry.token_file is not None:
            sources.append(entry.token_file)
            try:
                token = entry.token_file.read_text().strip()
            except OSError as error:
                raise TokensError(
                    f"{path}: entry {index}: token_file {entry.token_file}: {error.strerror}"
                ) from None
            if len(token) < 16:
                raise TokensError(f"{path}: entry {index}: the token is shorter than 16 characters")
        assert token is not None
        entries.append((token, Caller(entry.name, entry.role)))
    return Tokens(entries, tuple(sources))
