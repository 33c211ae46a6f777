"""Secret detection: what in a text must never be stored, in any phrasing.

:func:`findings` looks in four layers, in this order; :func:`sensitive` names the first found.

1. **Our patterns** (``_PATTERNS``): private key blocks, "password: …", API keys and tokens by
   their prefixes, credentials in URLs, US social security numbers.
2. **Credentials in words**: a credential word (password, PIN, one-time code, API key…) with
   something shaped like a secret near it (:func:`_credentials_in_words`).
3. **Provider formats** from detect-secrets (``_PLUGINS``): AWS, GitHub, Slack, Stripe and more.
4. **Card numbers**: 13 to 19 digits passing the Luhn check.

``bench/secrets.py`` measures how often ordinary conversation is flagged (bench/REPORT.md,
"Secrets").
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

#: (what it is, how it reads) for each secret kind found by a pattern of ours.
_PATTERNS: Final = (
    ("a private key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")),
    (
        "a password",
        re.compile(
            r"\b(?:password|passwd|passphrase|passcode|pwd|pin)\b\s*(?:is|was|:|=)\s*(?P<secret>\S+)",
            re.I,
        ),
    ),
    (
        "an API key",
        re.compile(
            r"\b(?:sk|pk|rk)[-_](?:live_|test_|proj-|ant-)?[A-Za-z0-9_-]{16,}|\bAKIA[0-9A-Z]{16}\b"
            r"|\bAIza[0-9A-Za-z_-]{35}\b"
        ),
    ),
    (
        "a token",
        re.compile(
            r"\bgh[pousr]_[A-Za-z0-9]{30,}|\bgithub_pat_\w{20,}|\bxox[abposr]-[A-Za-z0-9-]{10,}"
            r"|\beyJ[\w-]{8,}\.eyJ[\w-]{8,}\.[\w-]{8,}|\bbearer\s+[\w.~+/-]{16,}",
            re.I,
        ),
    ),
    (
        "a secret",
        re.compile(
            r"\b(?:api[_ -]?key|secret(?:[_ -]key)?|access[_ -]?key|client[_ -]secret"
            r"|(?:auth|access|refresh|api)?[_ -]?token)\b\s*(?:is|was|:|=)\s*[\"']?(?P<secret>[\w./+=-]{6,})",
            re.I,
        ),
    ),
    (
        "credentials in a URL",
        # A scheme is short: unbounded, a long run of "a-a-a-…" costs its length squared.
        re.compile(r"\b[a-z][a-z0-9+.-]{0,31}://[^\s:/@]+:(?P<secret>[^\s@/]+)@", re.I),
    ),
    ("a social security number", re.compile(r"\b\d{3}-\d{2}-\d{4}\b")),
)

#: Words that announce a credential, and (group "code") those after which digits alone are one.
_CREDENTIAL: Final = re.compile(
    r"\b(?:(?P<word>pass(?:word|phrase)?s?|passwd|pwd|pw|log-?in|sign-?in|secret|api[ _-]?key"
    r"|access[ _-]?key|private[ _-]?key|token)"
    r"|(?P<code>pins?|passcodes?|otp|one[ -]time (?:code|password|pin)|(?:verification|security"
    r"|login|auth(?:entication)?|2fa|mfa|sms|access|unlock|door|alarm|safe|locker) codes?"
    r"|codes?))\b",
    re.I,
)
#: Words before "code" that make it no secret (a zip code, a dress code…).
_PUBLIC_CODES: Final = frozenset(
    {
        "zip",
        "postal",
        "post",
        "area",
        "country",
        "dress",
        "source",
        "bar",
        "qr",
        "morse",
        "colour",
        "color",
        "promo",
        "discount",
        "coupon",
        "airport",
        "style",
        "penal",
        "civil",
    }
)
#: How many words after a credential word the secret may come, and how many before it.
_REACH: Final = 6
_BEFORE: Final = 4
_WORD: Final = re.compile(r"\S+")
_EDGES: Final = "\"'()[]{}<>,.;:!?\u201c\u201d\u2018\u2019"
_CARD: Final = re.compile(r"\b\d(?:[ -]?\d){12,18}\b")

#: The detect-secrets plugins used (module, class): formats of providers, never guesses. Its
#: keyword and high-entropy plugins are not used: they are written for source code and flag
#: ordinary words in conversation.
_PLUGINS: Final = (
    ("aws", "AWSKeyDetector"),
    ("azure_storage_key", "AzureStorageKeyDetector"),
    ("basic_auth", "BasicAuthDetector"),
    ("discord", "DiscordBotTokenDetector"),
    ("github_token", "GitHubTokenDetector"),
    ("gitlab_token", "GitLabTokenDetector"),
    ("jwt", "JwtTokenDetector"),
    ("mailchimp", "MailchimpDetector"),
    ("npm", "NpmDetector"),
    ("openai", "OpenAIDetector"),
    ("private_key", "PrivateKeyDetector"),
    ("pypi_token", "PypiTokenDetector"),
    ("sendgrid", "SendGridDetector"),
    ("slack", "SlackDetector"),
    ("square_oauth", "SquareOAuthDetector"),
    ("stripe", "StripeDetector"),
    ("telegram_token", "TelegramBotTokenDetector"),
    ("twilio", "TwilioKeyDetector"),
)


@dataclass(frozen=True, slots=True)
class Finding:
    """A secret found in a text: what it is, and where (``text[start:end]``)."""

    what: str
    start: int
    end: int


def sensitive(text: str) -> str | None:
    """What secret ``text`` holds ("a password", "an AWS Access Key"…), or None."""
    found = next(iter(findings(text)), None)
    return None if found is None else found.what


def findings(text: str) -> list[Finding]:
    """Every secret in ``text``, each with its span, in the order of the module's layers."""
    out = [
        Finding(what, *m.span("secret" if "secret" in pattern.groupindex else 0))
        for what, pattern in _PATTERNS
        for m in pattern.finditer(text)
    ]
    out += _credentials_in_words(text)
    for what, analyze in _detectors():
        for secret in analyze(text):
            at = text.find(secret) if secret else -1
            if at >= 0:
                out.append(Finding(what, at, at + len(secret)))
    out += [
        Finding("a card number", m.start(), m.end())
        for m in _CARD.finditer(text)
        if _luhn(re.sub(r"\D", "", m.group()))
    ]
    return out


def redact(text: str, placeholder: str = "[secret]") -> str:
    """``text`` with every secret found replaced by ``placeholder``."""
    spans = sorted((f.start, f.end) for f in findings(text))
    merged: list[list[int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    for start, end in reversed(merged):
        text = text[:start] + placeholder + text[end:]
    return text


def _credentials_in_words(text: str) -> list[Finding]:
    """A credential word (password, passphrase, pw, PIN, passcode, login, one-time /
    verification / security code, OTP, secret, API key, token…) with, within ``_REACH`` words
    after it (or ``_BEFORE`` before it), something shaped like a secret: a token mixing letters
    with digits or symbols, or a run of 4 to 8 digits after a PIN or code word. So "I always
    use the password hunter2-Quartz! for the staging box" and "log in with pw: Tr0ub4dor&3" are
    caught, while "I passed the driving test" and "the zip code is 90210" are not."""
    out = []
    # The text's words once, so that each cue looks at its neighbours in time linear in the text
    # (a text of cue words, "pw pw pw…", would otherwise cost its length squared).
    words = [(m.start(), m.end()) for m in _WORD.finditer(text)]
    starts = [start for start, _ in words]
    for cue in _CREDENTIAL.finditer(text):
        digits_count = cue.group("code") is not None
        # The words before the cue: those that start before it, the last cut where it starts.
        first_after = bisect.bisect_left(starts, cue.end())
        last_before = bisect.bisect_left(starts, cue.start())
        before = [
            (s, min(e, cue.start())) for s, e in words[max(0, last_before - _BEFORE) : last_before]
        ]
        if (
            cue.group().lower().startswith("code")
            and before
            and text[slice(*before[-1])].strip(_EDGES).lower() in _PUBLIC_CODES
        ):
            continue
        what = "a PIN or one-time code" if digits_count else "a password"
        for start, end in _after(words, first_after, cue.end()):
            token = text[start:end].strip(_EDGES)
            if _secret_shaped(token) or (digits_count and re.fullmatch(r"\d{4,8}", token)):
                out.append(Finding(what, start, end))
        # "I use Pa$$w0rd as my password": the secret may also come just before the word.
        out += [
            Finding("a password", start, end)
            for start, end in before
            if _secret_shaped(text[start:end].strip(_EDGES))
        ]
    return out


def _after(words: list[tuple[int, int]], first: int, at: int) -> list[tuple[int, int]]:
    """The ``_REACH`` words from ``at`` on: a word the cue ends inside counts from ``at``."""
    out = []
    if first > 0 and words[first - 1][1] > at:  # "pw:hunter2" is one word holding the cue
        out.append((at, words[first - 1][1]))
    out += words[first : first + _REACH]
    return out[:_REACH]


def _secret_shaped(token: str) -> bool:
    """Whether a word looks made up to be hard to guess: 6 or more characters with letters and
    digits ("hunter2", "Tr0ub4dor&3"; not "covid-19", a date, a time or an amount), or with
    upper and lower case and a symbol ("Pa$$word")."""
    if len(token) < 6 or not re.search(r"[A-Za-z]", token):
        return False
    if re.search(r"\d", token):
        return not re.fullmatch(
            r"[A-Za-z]+-\d+|[\d:.,/-]*\d(?:st|nd|rd|th|s|am|pm|k|km|kg|m|h|min)?", token, re.I
        )
    return bool(
        re.search(r"[^A-Za-z\d'-]", token)
        and re.search(r"[a-z]", token)
        and re.search(r"[A-Z]", token)
    )


@functools.cache
def _detectors() -> tuple[tuple[str, Callable[[str], Iterable[str]]], ...]:
    """detect-secrets' provider plugins, imported on first use (a quarter of a second)."""
    import importlib

    out = []
    for module, cls in _PLUGINS:
        plugin = getattr(importlib.import_module(f"detect_secrets.plugins.{module}"), cls)()
        name = plugin.secret_type
        out.append((f"{'an' if name[0].lower() in 'aeiou' else 'a'} {name}", plugin.analyze_string))
    return tuple(out)


def _luhn(digits: str) -> bool:
    total = 0
    for n, ch in enumerate(reversed(digits)):
        d = int(ch) * (2 if n % 2 else 1)
        total += d - 9 if d > 9 else d
    return 13 <= len(digits) <= 19 and total % 10 == 0
