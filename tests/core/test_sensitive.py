"""Capture never stores a secret, whatever the phrasing; ordinary sentences still go in; any text
is checked in time linear in its length."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from graphmem import InvalidInput, Memory, Settings
from graphmem.sensitive import findings, redact, sensitive

from ..support.clock import Clock
from .test_capture import SECRETS as CAPTURE_SECRETS
from .test_erasure import _hits

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


# ------------------------------------------------------------- with the conversation kept

#: Every phrasing above, said in a conversation: each message also names its own marker (a
#: word nothing else holds) in sentences capture would otherwise keep as facts.
SAID = [
    f"Plovdrix{n:02d} always prefers dark mode. Remember this: {secret}. "
    f"Plovdrix{n:02d} lives in Berlin."
    for n, secret in enumerate([*SECRETS, *CAPTURE_SECRETS])
]
#: Secrets where a turn is cut in parts or loses its code: past the first part of a long
#: message, and in fenced code.
TAIL_SECRET = "the password is Kestrel-88!"
CODE_SECRET = "ghp_1234567890abcdefghijABCDEFGHIJ9999"
HIDDEN = [
    "Plovdrix90 wrote a long note. "
    + " ".join(f"The tram number {n} runs along the river to the old harbour." for n in range(40))
    + f" By the way {TAIL_SECRET}",
    f"Plovdrix91 deploys with this:\n```\nexport GITHUB_TOKEN={CODE_SECRET}\n```",
]
KEPT = ["The tram to the harbour leaves at nine.", "Thanks, I will take the early one."]


def _said_needles(mem: Memory, messages: list[str]) -> list[bytes]:
    """What of ``messages`` must be in no file: the marker (in each message and in each
    sentence but the secret's), each secret, the words of a secret holding a digit (as the
    keyword index keeps them) and each message's float32 vector."""
    secrets = [*SECRETS, *CAPTURE_SECRETS, TAIL_SECRET, CODE_SECRET]
    words = {
        w
        for s in secrets
        for w in re.findall(r"[\w-]+", s.lower())
        if len(w) >= 6 and re.search(r"\d", w)
    }
    vectors = mem.embedder.embed(messages)
    return (
        [b"plovdrix"]
        + [s.encode() for s in secrets]
        + [w.encode() for w in sorted(words)]
        + [np.asarray(v, dtype="<f4").tobytes() for v in vectors]
    )


def test_with_turns_kept_no_message_holding_a_secret_is_kept_in_any_form(
    data_dir: Path, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    """The conversation is kept, but never a message holding a secret: not as a turn, a part
    of one, a fact drawn from it, a window, a keyword or a vector, in any file."""
    caplog.set_level(logging.DEBUG)
    messages = [*SAID, *HIDDEN]
    roles = ["user", "assistant"]
    said: list[dict[str, Any]] = [
        {"role": roles[n % 2], "content": text} for n, text in enumerate([*messages, *KEPT])
    ]
    with Memory.open(data_dir, settings=Settings(embedder="hash"), clock=clock) as mem:
        results = mem.capture(said, episode="chat", keep="conversation")
        refused = [r for r in results if r.message < len(messages)]
        assert {r.message for r in refused} == set(range(len(messages)))
        assert all(r.action == "SKIP" and r.fact is None and r.text is None for r in refused)
        kept = [r.fact.text for r in results if r.fact is not None]
        assert kept == KEPT  # the others are kept as turns
        stored = [f.text for _, f in mem.facts(first=1000, include_superseded=True).items]
        assert stored == KEPT
        namespace = data_dir / "default"
        assert _hits(namespace, [KEPT[0].encode()]), "the positive control: turns are on disk"
        needles = _said_needles(mem, messages)
    assert _hits(namespace, needles) == []
    assert "plovdrix" not in caplog.text.lower()


# ------------------------------------------------------------------------ adversarial texts

#: The length of the texts below: twice the longest field a write takes (the attack run's size).
LONG = 20_000
#: Linear code checks such a text in a few tens of milliseconds (the bound leaves room for a
#: loaded machine); the patterns that read a run again from each repetition took 0.35-1.7 s.
BOUND_S = 0.2
OPENAI_KEY = "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0" + "T3BlbkFJ" + "k1L2m3N4o5P6q7R8s9T0"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N"
NPM_LINE = "//registry.npmjs.org/:_authToken=npm_abcdefghijklmnopqrstuvwxyz0123456789"
SENDGRID_KEY = "SG.abcdefghijklmnopqrstuv.abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG"


def _repeated(piece: str, length: int = LONG) -> str:
    return (piece * (length // len(piece) + 1))[:length]


def _fastest(check: Callable[[], object]) -> float:
    """The best of three timings of ``check()``, in seconds (the machine is shared)."""
    times = []
    for _ in range(3):
        started = time.perf_counter()
        check()
        times.append(time.perf_counter() - started)
    return min(times)


@pytest.mark.parametrize(
    "piece",
    ["sk-", "sk-a", "eyJ-", "//", "//a/", "://", "pw:", "pw-", "password:", "token=", "api_key="],
)
def test_a_long_text_of_one_prefix_repeated_is_checked_in_tens_of_milliseconds(
    piece: str,
) -> None:
    """Once 0.35 to 1.7 s each, five such fields a fact: the OpenAI, JWT and npm patterns and
    graphmem's own token pattern read the rest of the run again from each repetition, and each
    credential word in one long word read the rest of that word."""
    text = _repeated(piece)
    findings("warm up")
    assert _fastest(lambda: findings(text)) < BOUND_S


@pytest.mark.parametrize(
    ("junk", "secret", "what"),
    [
        ("sk-", OPENAI_KEY, "an OpenAI Token"),
        ("eyJ", JWT, "a JSON Web Token"),
        ("eyJ-", JWT, "a token"),
        ("//", NPM_LINE, "a NPM tokens"),
        ("pw:", "pw: Tr0ub4dor&3", "a password"),
    ],
    ids=["openai", "jwt", "graphmem-jwt", "npm", "credential-word"],
)
def test_a_secret_after_a_long_run_of_its_prefix_is_found_and_redacted_in_time(
    junk: str, secret: str, what: str
) -> None:
    separator = "\n" if junk == "//" else " "
    text = _repeated(junk, LONG - len(secret) - 1) + separator + secret
    found: list[str] = []
    assert _fastest(lambda: found.extend(f.what for f in findings(text))) < BOUND_S
    assert what in found
    assert secret.split()[-1][-12:] not in redact(text)


def test_every_copy_of_a_secret_written_twice_is_found_and_redacted() -> None:
    """A provider format's finding was placed at the first copy of the text found, so the second
    copy of a key written twice was left in the redacted text."""
    text = f"the key {SENDGRID_KEY} again: {SENDGRID_KEY}"
    spans = [(f.start, f.end) for f in findings(text) if f.what == "a SendGrid API Key"]
    assert [text[a:b] for a, b in spans] == [SENDGRID_KEY, SENDGRID_KEY] and len(set(spans)) == 2
    assert redact(text) == "the key [secret] again: [secret]"
