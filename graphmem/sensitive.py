"""Secret detection: what in a text must never be stored, in any phrasing.

:func:`findings` looks in four layers, in this order; :func:`sensitive` names the first found.

1. **Our patterns** (``_PATTERNS``): private key blocks, "password: …", API keys and tokens by
   their prefixes, credentials in URLs, US social security numbers.
2. **Credentials in words**: a credential word (password, PIN, one-time code, API key…) with
   something shaped like a secret near it (:func:`_credentials_in_words`).
3. **Provider formats** from detect-secrets (``_PLUGINS``): AWS, GitHub, Slack, Stripe and more.
4. **Card numbers**: 13 to 19 digits passing the Luhn check.

Every layer reads a text in time linear in its length, whatever it holds: the provider formats
whose patterns would rescan a run of their prefix from each repetition ("sk-sk-sk-…") are tried
only where detect-secrets' own search could first match (:data:`_FIRST_IN_RUN`), a word is
judged by its first ``_WORD_READ`` characters, and a word holding cue word after cue word by
its first ``_REACH`` cues. ``bench/secrets.py`` measures how often ordinary conversation is
flagged (bench/REPORT.md, "Secrets") and how long the adversarial texts take.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

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
            # At the start of a run of [\w-] only: tried after each "-" of "eyJ-eyJ-…", it would
            # read the rest of the run each time (a JWT glued after a "-" is the plugin's).
            r"|(?<![\w-])eyJ[\w-]{8,}\.eyJ[\w-]{8,}\.[\w-]{8,}|\bbearer\s+[\w.~+/-]{16,}",
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
#: How much of a word is read to judge whether it is shaped like a secret (a word of
#: thousands of characters is judged by its start).
_WORD_READ: Final = 64
_CARD: Final = re.compile(r"\b\d(?:[ -]?\d){12,18}\b")
_DIGITS: Final = re.compile(r"\d{4,8}")
#: What ``_secret_shaped`` looks for in a word, and the words with digits it does not take.
_LETTER: Final = re.compile(r"[A-Za-z]")
_DIGIT: Final = re.compile(r"\d")
_SYMBOL: Final = re.compile(r"[^A-Za-z\d'-]")
_LOWER: Final = re.compile(r"[a-z]")
_UPPER: Final = re.compile(r"[A-Z]")
_NOT_MADE_UP: Final = re.compile(
    r"[A-Za-z]+-\d+|[\d:.,/-]*\d(?:st|nd|rd|th|s|am|pm|k|km|kg|m|h|min)?", re.I
)

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
#: The plugins whose pattern is a prefix, then a run of characters it reads to its end before
#: deciding (module: prefix, the run's characters). Searched as detect-secrets searches, a run of
#: the prefix repeated ("sk-sk-…", "eyJeyJ…", "////…") is read again from each repetition: its
#: length squared. But where a later prefix in a run matches, the first one in it matches too
#: (it reads the same run, only longer), and a match ends past every later one, so trying the
#: first prefix of each run, from the end of the last match on, finds exactly the same matches.
_FIRST_IN_RUN: Final = {
    "openai": ("sk-", re.compile(r"[A-Za-z0-9_-]+")),
    "jwt": ("eyJ", re.compile(r"[A-Za-z0-9_=-]+")),
    "npm": ("//", re.compile(r"[^\n]+")),
}


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
    out += _provider_formats(text)
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
    judged: dict[tuple[int, int], tuple[bool, bool]] = {}

    def judge(start: int, end: int) -> tuple[bool, bool]:
        """Whether the word is shaped like a secret, and whether it is 4 to 8 digits: each
        word judged once, however many cues reach it."""
        if (start, end) not in judged:
            token = _read(text, start, end)
            judged[start, end] = (_secret_shaped(token), bool(_DIGITS.fullmatch(token)))
        return judged[start, end]

    word = cues = 0  # the word the last cue is in, and how many cues it holds so far
    for cue in _CREDENTIAL.finditer(text):
        # A word holding cue after cue ("pw-pw-pw-…") is judged by its first few: each would
        # judge the rest of that word again.
        holder = bisect.bisect_right(starts, cue.start()) - 1
        word, cues = holder, (cues + 1 if holder == word else 1)
        if cues > _REACH:
            continue
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
            and _read(text, *before[-1]).lower() in _PUBLIC_CODES
        ):
            continue
        what = "a PIN or one-time code" if digits_count else "a password"
        for start, end in _after(words, first_after, cue.end()):
            shaped, digits = judge(start, end)
            if shaped or (digits_count and digits):
                out.append(Finding(what, start, end))
        # "I use Pa$$w0rd as my password": the secret may also come just before the word.
        out += [Finding("a password", s, e) for s, e in before if judge(s, e)[0]]
    return out


def _read(text: str, start: int, end: int) -> str:
    """The word ``text[start:end]`` as it is judged: its first ``_WORD_READ`` characters, without
    the quotes and punctuation at its edges."""
    return text[start : min(end, start + _WORD_READ)].strip(_EDGES)


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
    if len(token) < 6 or not _LETTER.search(token):
        return False
    if _DIGIT.search(token):
        return not _NOT_MADE_UP.fullmatch(token)
    return bool(_SYMBOL.search(token) and _LOWER.search(token) and _UPPER.search(token))


def _provider_formats(text: str) -> list[Finding]:
    """What detect-secrets' provider plugins find in ``text``, as their ``analyze_string``
    finds it (each non-empty group of a match, else the match; a JWT only if well formed), but
    with where each is: so every copy of a secret that is written twice is found."""
    out = []
    for what, plugin, first_in_run, check in _detectors():
        for pattern in plugin.denylist:
            found = (
                pattern.finditer(text)
                if first_in_run is None
                else _first_in_run(pattern, text, *first_in_run)
            )
            for match in found:
                if pattern.groups:
                    spans = [match.span(g) for g in range(1, pattern.groups + 1) if match.group(g)]
                else:
                    spans = [match.span()]
                out += [
                    Finding(what, start, end)
                    for start, end in spans
                    if check is None or check(text[start:end])
                ]
    return out


def _first_in_run(
    pattern: re.Pattern[str], text: str, prefix: str, run: re.Pattern[str]
) -> Iterator[re.Match[str]]:
    """The matches of ``pattern`` in ``text`` (see :data:`_FIRST_IN_RUN`), each tried at the
    first ``prefix`` of a run of ``run``'s characters after the last match; a run where it
    does not match is passed over whole."""
    at = text.find(prefix)
    while at >= 0:
        match = pattern.match(text, at)
        if match is not None:
            yield match
            done = match.end()
        else:
            chars = run.match(text, at)
            done = at + 1 if chars is None else chars.end()
        at = text.find(prefix, done)


@functools.cache
def _detectors() -> tuple[
    tuple[str, Any, tuple[str, re.Pattern[str]] | None, Callable[[str], bool] | None], ...
]:
    """detect-secrets' provider plugins, imported on first use (a quarter of a second): what
    each finds, the plugin, how its pattern is searched (:data:`_FIRST_IN_RUN`; None: as
    usual) and the check its ``analyze_string`` makes of a match (the JWT plugin's)."""
    import importlib

    from detect_secrets.plugins.base import RegexBasedDetector

    out = []
    for module, cls in _PLUGINS:
        plugin = getattr(importlib.import_module(f"detect_secrets.plugins.{module}"), cls)()
        name = plugin.secret_type
        what = f"{'an' if name[0].lower() in 'aeiou' else 'a'} {name}"
        check = None
        if type(plugin).analyze_string is not RegexBasedDetector.analyze_string:
            # It filters what the patterns find (JWT: a well-formed token); asked of one match,
            # it gives that match back if it keeps it.
            check = functools.partial(_kept_by, plugin)
        out.append((what, plugin, _FIRST_IN_RUN.get(module), check))
    return tuple(out)


def _kept_by(plugin: Any, secret: str) -> bool:
    return secret in plugin.analyze_string(secret)


def _luhn(digits: str) -> bool:
    total = 0
    for n, ch in enumerate(reversed(digits)):
        d = int(ch) * (2 if n % 2 else 1)
        total += d - 9 if d > 9 else d
    return 13 <= len(digits) <= 19 and total % 10 == 0
