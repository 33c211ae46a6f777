"""Capture never stores a secret, whatever the phrasing; ordinary sentences still go in."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphmem import InvalidInput, Memory, Settings
from graphmem.sensitive import sensitive

from ..support.clock import Clock

SECRETS = [
    "I always use the password hunter2-Quartz! for the staging box",
    "I always log in with pw: Tr0ub4dor&3 on the router",
    "My password is swordfish",
    "the wifi passphrase is correct-horse-battery-staple9",
    "Remember my login: admin / Sup3rS3cret!",
    "My PIN is 4821",
    "my bank pin: 0042",
    "The door code is 7719, don't forget it",
    "Your verification code is 552019",
    "OTP 384021 expires in five minutes",
    "my one-time code 778812",
    "Use passcode 9931 for the voicemail",
    "The alarm code is 2580",
    "Remember the API key sk-proj-abcdefghijklmnopqrstuvwxyz123456",
    "Our stripe key is sk_live_4eC39HqLyjWDarjtT1zdp7dc",
    "Use token ghp_1234567890abcdefghijABCDEFGHIJ123456 for the CI",
    "the slack token is xoxb-123456789012-1234567890123-abcdefghijklmnop",
    "Authorization: Bearer abcdefghijklmnopqrstuvwxyz012345",
    "the jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
    "-----BEGIN RSA PRIVATE KEY----- MIIEpAIBAAKCAQEA",
    "the db is at postgres://bob:s3cretpw@db.internal:5432/app",
    "connect with mysql://root:hunter22@localhost/test",
    "The AWS access key is AKIAIOSFODNN7EXAMPLE",
    "aws secret key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "My card number is 4111 1111 1111 1111",
    "Pay with 5500-0000-0000-0004 next time",
    "My social security number is 078-05-1120",
    "Google key AIzaSyA1234567890abcdefghijklmnopqrstuv",
    "I use Pa$$w0rd as my password everywhere",
    "The safe code is 1966 and the key is in the drawer",
    "remember the client secret: 9f8e7d6c5b4a3210",
    "my 2fa code was 661043 this morning",
]

ORDINARY = [
    "I prefer dark mode in every editor",
    "My favourite number is 7",
    "I passed the driving test yesterday",
    "The zip code is 90210",
    "I was born on 12 May 1990",
    "I moved to Berlin in 2019",
    "We decided to use PostgreSQL 16 for the new service",
    "The meeting is at 10:30am on Thursday",
    "My phone is an iPhone 15",
    "I got covid-19 last year but I am fine now",
    "The password manager we chose is Bitwarden",
    "I always forget my passwords, so I use a manager",
    "The dress code for the wedding is black tie",
    "Our team has 12 engineers and 3 designers",
    "I ran 10k in 52 minutes",
    "The key to success is patience",
]


@pytest.mark.parametrize("text", SECRETS)
def test_a_secret_is_recognised_in_any_phrasing(text: str) -> None:
    assert sensitive(text) is not None


@pytest.mark.parametrize("text", ORDINARY)
def test_an_ordinary_sentence_is_not_taken_for_a_secret(text: str) -> None:
    assert sensitive(text) is None


def test_capture_skips_every_message_holding_a_secret_and_keeps_the_others(mem: Memory) -> None:
    results = mem.capture(
        [{"role": "user", "content": text} for text in [*SECRETS, "I prefer dark mode."]]
    )
    skipped = [r for r in results if r.message < len(SECRETS)]
    assert skipped and all(r.action == "SKIP" and r.fact is None for r in skipped)
    assert all(r.reason.startswith("sensitive content (") for r in skipped)
    assert all(r.text is None for r in skipped)  # the secret is never repeated
    stored = [r for r in results if r.message == len(SECRETS)]
    assert [r.action for r in stored] == ["ADD"]
    assert all("hunter2" not in f.text for _, f in mem.facts().items)


def test_direct_writes_store_refuse_or_redact_secrets_as_configured(
    data_dir: Path, clock: Clock
) -> None:
    text = "The staging password is hunter2-Quartz! for now"
    with Memory.open(data_dir / "allow", settings=Settings(embedder="hash"), clock=clock) as mem:
        assert mem.store(text).action == "ADD"  # unchanged by default
    refuse = Settings(embedder="hash", store_secrets="refuse")
    with Memory.open(data_dir / "refuse", settings=refuse, clock=clock) as mem:
        with pytest.raises(InvalidInput) as error:
            mem.store_many([{"text": "fine"}, {"text": "ok", "value": "pw: Tr0ub4dor&3"}])
        assert error.value.field == "items[1].value"
        assert mem.facts().items == []
    redact = Settings(embedder="hash", store_secrets="redact")
    with Memory.open(data_dir / "redact", settings=redact, clock=clock) as mem:
        stored = mem.store(text).fact
        assert stored is not None and stored.text == "The staging password is [secret] for now"
        assert mem.search("hunter2", mode="fts") == []
        files = [p for p in (data_dir / "redact").rglob("*") if p.is_file()]
        assert not any(b"hunter2" in p.read_bytes() for p in files)
