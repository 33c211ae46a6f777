"""The relationship explorer in a real browser: headless Chromium, driven by Selenium, against a
live server on 127.0.0.1 with seeded memory. Skipped when Chromium or its driver is missing
(Debian: ``apt-get install chromium chromium-driver``; ``.ci/run`` installs them as root).

Each test leaves a screenshot in ``test-artefacts/explorer/``. Regenerate the screenshot of
docs/explorer.md with ``.venv/bin/python -m tests.server.test_explorer_browser``.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from graphmem.server import create_app

from graphmem import Memory, Settings
from graphmem.storage.sqlite.keys import KeyFile

from ..support.clock import Clock
from ..support.graphql_clients import LiveServer

ROOT = Path(__file__).resolve().parents[2]
ARTEFACTS = ROOT / "test-artefacts" / "explorer"
WAIT = 15  # seconds for the page to answer an action

pytestmark = [pytest.mark.browser, pytest.mark.integration]


@dataclass
class Explorer:
    """The live server, its clock and data directory, the seeded facts' ids, and the browser."""

    server: LiveServer
    clock: Clock
    data_dir: Path
    ids: dict[str, str]
    driver: Any

    def open(self, fragment: str = "") -> None:
        self.driver.get(f"{self.server.base_url}/explore{fragment}")
        self.wait(
            lambda d: d.find_element("id", "namespace").text != "…", "the page never connected"
        )

    def wait(self, condition: Callable[[Any], object], message: str) -> Any:
        from selenium.webdriver.support.ui import WebDriverWait

        return WebDriverWait(self.driver, WAIT, poll_frequency=0.05).until(condition, message)

    def text(self, element_id: str) -> str:
        return str(self.driver.find_element("id", element_id).text)

    def drawn(self, nodes: int, edges: int) -> None:
        """Wait until the graph shows this many facts and links."""

        def done(driver: Any) -> bool:
            graph = driver.find_element("id", "graph")
            return (
                graph.get_attribute("data-state"),
                graph.get_attribute("data-nodes"),
                graph.get_attribute("data-edges"),
            ) == ("ready", str(nodes), str(edges))

        self.wait(done, f"the graph never showed {nodes} facts and {edges} links")

    def graph(self) -> dict[str, Any]:
        """What Cytoscape draws: each node's label and classes, each edge's type and ends."""
        return dict(
            self.driver.execute_script("""
            const cy = window.explorer.cy;
            return {
              nodes: Object.fromEntries(cy.nodes().map(n => [n.id(), {label: n.data('label'),
                       category: n.data('category'), classes: n.classes()}])),
              edges: cy.edges().map(e => [e.data('source'), e.data('type'), e.data('target')]),
            };""")
        )

    def click_node(self, fact_id: str) -> None:
        """Click a node of the graph where it is drawn on the canvas."""
        from selenium.webdriver.common.action_chains import ActionChains

        graph = self.driver.find_element("id", "graph")
        x, y = self.driver.execute_script(
            "const p = window.explorer.cy.getElementById(arguments[0]).renderedPosition();"
            "return [p.x, p.y];",
            fact_id,
        )
        size = graph.size
        ActionChains(self.driver).move_to_element_with_offset(
            graph, int(x - size["width"] / 2), int(y - size["height"] / 2)
        ).click().perform()

    def screenshot(self, name: str) -> None:
        ARTEFACTS.mkdir(parents=True, exist_ok=True)
        self.driver.save_screenshot(str(ARTEFACTS / f"{name}.png"))


def seed(memory: Memory, clock: Clock) -> dict[str, str]:
    """A small memory: Ana moved from Berlin to Paris (a supersession), leads a project that a
    decision is part of; plus two unrelated facts for the writing test."""
    quiet: dict[str, Any] = {"autolink": False, "entity_links": False}

    def store(text: str, **fields: Any) -> str:
        fact = memory.store(text, **quiet, **fields).fact
        assert fact is not None
        return fact.id

    ids = {
        "trains": store(
            "Ana prefers trains to planes",
            entity="ana",
            category="preference",
            valid_from="2019-01-01",
            classify=False,
        ),
        "berlin": store(
            "Ana lives in Berlin",
            entity="ana",
            key="city",
            value="Berlin",
            valid_from="2020-01-01",
            tags=["profile"],
        ),
    }
    clock.advance(60)
    ids["paris"] = store(
        "Ana lives in Paris",
        entity="ana",
        key="city",
        value="Paris",
        valid_from="2023-06-01",
        tags=["profile"],
        why="she moved",
    )
    ids["lead"] = store("Ana leads the checkout project", entity="ana", classify=False)
    ids["move"] = store(
        "The checkout team moves to Lisbon in 2027", category="decision", classify=False
    )
    ids["office"] = store(
        "Lisbon office", entity="lisbon office", category="entity", classify=False
    )
    ids["standup"] = store("The daily standup is at 9:30", category="decision", classify=False)
    ids["fridays"] = store("The team works remotely on Fridays", classify=False)
    memory.link(ids["trains"], ids["berlin"], "RELATED_TO", valid_from="2020-01-01")
    memory.link(ids["paris"], ids["trains"], "RELATED_TO", strength=0.4)
    memory.link(ids["lead"], ids["paris"], "RELATED_TO")
    memory.link(ids["move"], ids["lead"], "PART_OF")
    memory.link(ids["move"], ids["office"], "DEPENDS_ON", strength=0.6)
    return ids


#: A markdown note the explorer shows as a document: its path and the lines of each chunk.
GARDEN = "# Garden\n\nThe tomatoes need water every morning.\nThe basil likes shade.\n"


def chromium() -> tuple[str, str] | None:
    """Paths of Chromium and chromedriver, or None."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def require_chromium() -> tuple[str, str]:
    """Paths of Chromium and chromedriver; the test is skipped, saying why, without them."""
    paths = chromium()
    if paths is None:
        pytest.skip(
            "Chromium not found: the browser tests need the Debian packages chromium and "
            "chromium-driver (`apt-get install chromium chromium-driver`; .ci/run installs "
            "them when it runs as root)"
        )
    return paths


def start_browser(paths: tuple[str, str], *arguments: str, network_log: bool = False) -> Any:
    """Headless Chromium with these extra command-line ``arguments``; with ``network_log``, every
    request its pages make is in ``driver.get_log("performance")`` (as DevTools' Network events)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = paths[0]
    for argument in (
        *arguments,
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1400,900",
        "--force-device-scale-factor=1",
        "--lang=en-GB",
        "--no-first-run",
        "--disable-extensions",
    ):
        options.add_argument(argument)
    logs = {"browser": "ALL"}
    if network_log:
        logs["performance"] = "ALL"
        options.add_experimental_option("perfLoggingPrefs", {"enableNetwork": True})
    options.set_capability("goog:loggingPrefs", logs)
    return webdriver.Chrome(options=options, service=Service(paths[1]))


@pytest.fixture(scope="module")
def explorer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Explorer]:
    paths = require_chromium()
    data_dir = tmp_path_factory.mktemp("explorer") / "data"
    notes = data_dir.parent / "notes"
    notes.mkdir()
    (notes / "garden.md").write_text(GARDEN, encoding="utf-8")
    clock = Clock()
    settings = Settings(embedder="hash", data_dir=data_dir)
    with Memory.open(data_dir, settings=settings, clock=clock) as memory:
        ids = seed(memory, clock)
        memory.sync_files([notes])
        ids["garden"] = str((notes / "garden.md").resolve())
    driver = start_browser(paths)
    try:
        with LiveServer(create_app(settings, clock=clock)) as server:
            yield Explorer(server, clock, data_dir, ids, driver)
    finally:
        driver.quit()


@pytest.fixture
def page(explorer: Explorer, request: pytest.FixtureRequest) -> Iterator[Explorer]:
    """The explorer for one test: a screenshot of where it ended, and no page errors."""
    explorer.driver.get("about:blank")
    yield explorer
    explorer.screenshot(request.node.name)
    errors = [
        entry["message"]
        for entry in explorer.driver.get_log("browser")
        if entry["level"] == "SEVERE" and entry.get("source") != "network"  # 401s are expected
    ]
    assert errors == [], "the page logged errors"


def test_search_finds_a_seeded_fact_and_draws_its_neighbourhood(page: Explorer) -> None:
    page.open()
    search = page.driver.find_element("id", "search-input")
    search.send_keys("where does Ana live\n")
    page.wait(lambda d: "Ana lives in Paris" in page.text("results"), "search found nothing")
    assert "Ana lives in Berlin" not in page.text("results")  # replaced: not listed by default
    page.driver.find_element("id", "include-superseded").click()
    page.wait(lambda d: "Ana lives in Berlin" in page.text("results"), "no replaced version")
    assert "replaced" in page.text("results")

    paris = page.ids["paris"]
    page.driver.find_element("css selector", f'#results button[data-id="{paris}"]').click()
    page.drawn(nodes=4, edges=4)
    drawn = page.graph()
    ids = page.ids
    assert set(drawn["nodes"]) == {ids["paris"], ids["berlin"], ids["trains"], ids["lead"]}
    assert sorted(drawn["edges"]) == sorted(
        [
            [ids["paris"], "SUPERSEDES", ids["berlin"]],
            [ids["paris"], "RELATED_TO", ids["trains"]],
            [ids["trains"], "RELATED_TO", ids["berlin"]],
            [ids["lead"], "RELATED_TO", ids["paris"]],
        ]
    )
    assert "root" in drawn["nodes"][paris]["classes"]
    assert "superseded" in drawn["nodes"][ids["berlin"]]["classes"]  # drawn faded and dashed
    assert drawn["nodes"][ids["trains"]]["category"] == "preference"
    assert page.text("details-text") == "Ana lives in Paris"
    details = page.text("details-fields")
    for shown in (
        "Value\nParis",
        "Valid from\n2023-06-01",
        "Tags\nprofile",
        "Why\nshe moved",
        "Decay class\npermanent",
        "Confidence\n1",
    ):
        assert shown in details
    versions = page.driver.find_elements("css selector", "#timeline li.version")
    assert [v.text.splitlines()[1] for v in versions] == [
        "Ana lives in Berlin",
        "Ana lives in Paris",
    ]


def test_the_details_show_the_time_a_fact_states(page: Explorer) -> None:
    page.open()
    page.driver.find_element("id", "search-input").send_keys("checkout team Lisbon\n")
    page.wait(lambda d: "moves to Lisbon in 2027" in page.text("results"), "search found nothing")
    move = page.ids["move"]
    page.driver.find_element("css selector", f'#results button[data-id="{move}"]').click()
    page.wait(lambda d: "Says" in page.text("details-fields"), "no stated time shown")
    assert "Says\n\u201cin 2027\u201d: 2027-01-01 \u2192 2028-01-01" in page.text("details-fields")


def test_clicking_a_node_adds_its_neighbours(page: Explorer) -> None:
    page.open(f"#fact={page.ids['paris']}")
    page.drawn(nodes=4, edges=4)
    page.click_node(page.ids["lead"])
    page.drawn(nodes=5, edges=5)
    assert page.text("details-text") == "Ana leads the checkout project"
    page.click_node(page.ids["move"])
    page.drawn(nodes=6, edges=6)
    assert page.graph()["nodes"][page.ids["office"]]["label"] == "Lisbon office"
    assert "DEPENDS_ON" in page.text("details-links")

    direction = page.driver.find_element("id", "direction")
    direction.find_element("css selector", "option[value=OUT]").click()
    page.drawn(nodes=3, edges=3)  # Paris's own links lead to Berlin and trains only
    direction.find_element("css selector", "option[value=BOTH]").click()
    page.drawn(nodes=6, edges=6)  # the expanded facts are remembered
    page.driver.find_element("css selector", "#types input[value=SUPERSEDES]").click()
    page.drawn(nodes=5, edges=4)  # without SUPERSEDES, the replaced Berlin is out of sight
    assert page.ids["berlin"] not in page.graph()["nodes"]
    page.driver.find_element("css selector", "#types input[value=SUPERSEDES]").click()
    page.drawn(nodes=6, edges=6)


def test_moving_as_of_before_a_supersession_shows_the_old_version(page: Explorer) -> None:
    from selenium.webdriver.common.keys import Keys

    page.open(f"#fact={page.ids['paris']}")
    page.drawn(nodes=4, edges=4)
    page.driver.find_element("id", "as-of-slider").send_keys(Keys.HOME)  # Berlin's first day
    page.drawn(nodes=2, edges=1)
    assert page.text("details-text") == "Ana lives in Berlin"
    assert page.text("as-of-shown") == "2020-01-01"
    assert "version of the picked fact that was valid then" in page.text("graph-summary")
    drawn = page.graph()
    assert set(drawn["nodes"]) == {page.ids["berlin"], page.ids["trains"]}
    assert "superseded" not in drawn["nodes"][page.ids["berlin"]]["classes"]  # current then
    shown = page.driver.find_element("css selector", "#timeline li.shown")
    assert "Ana lives in Berlin" in shown.text
    page.screenshot("as-of-2020")

    page.driver.find_element("id", "as-of-now").click()
    page.drawn(nodes=4, edges=4)
    assert page.text("details-text") == "Ana lives in Paris"


def test_a_link_and_a_forget_made_in_the_page_change_the_graph(page: Explorer) -> None:
    page.open(f"#fact={page.ids['standup']}")
    page.drawn(nodes=1, edges=0)
    assert page.text("access") == "read-write"
    target = page.driver.find_element("id", "link-target-id")
    target.send_keys("no-such-fact")
    page.driver.find_element("id", "link-button").click()
    page.wait(lambda d: "NOT_FOUND" in page.text("alert"), "the refused link was not reported")
    target.clear()
    target.send_keys(page.ids["fridays"])
    page.driver.find_element("id", "link-button").click()
    page.drawn(nodes=2, edges=1)
    assert page.graph()["edges"] == [[page.ids["standup"], "RELATED_TO", page.ids["fridays"]]]

    page.driver.find_element("id", "forget-button").click()
    assert "The daily standup is at 9:30" in page.text("forget-dialog")
    page.driver.find_element("css selector", "#forget-dialog button[value=cancel]").click()
    assert page.driver.find_element("id", "graph").get_attribute("data-nodes") == "2"
    page.clock.set("2026-01-02T00:00:00+00:00")  # forgotten a day after it was recorded
    page.driver.find_element("id", "forget-button").click()
    page.driver.find_element("id", "forget-confirm").click()
    page.drawn(nodes=0, edges=0)
    assert "No version of this fact is visible now" in page.text("graph-summary")
    assert "Forgot" in page.text("notice")

    known_at = page.driver.find_element("id", "known-at")
    page.driver.execute_script(
        "arguments[0].value = '2026-01-01T12:00:00';"
        "arguments[0].dispatchEvent(new Event('change'));",
        known_at,
    )  # what memory knew before the forgetting
    page.drawn(nodes=2, edges=1)
    assert "forgotten" in page.graph()["nodes"][page.ids["standup"]]["classes"]
    assert page.text("details-status").startswith("decision Forgotten on 2026-01-02")


def test_an_error_of_the_api_is_shown_and_the_page_keeps_working(page: Explorer) -> None:
    page.open("#fact=no-such-fact")
    page.wait(lambda d: "NOT_FOUND" in page.text("alert"), "the unknown fact was not reported")
    assert "no-such-fact" in page.text("alert")
    assert page.driver.find_element("id", "graph").get_attribute("data-state") == "error"
    page.driver.find_element("id", "search-input").send_keys("Lisbon office\n")
    page.wait(lambda d: "Lisbon office" in page.text("results"), "search stopped working")


def test_with_api_keys_the_page_asks_for_one_and_keeps_it_for_the_tab(page: Explorer) -> None:
    keys = KeyFile(page.data_dir)
    token, key = keys.create(["default"], read_only=True, label="browser test")
    try:
        page.driver.get(f"{page.server.base_url}/explore#fact={page.ids['paris']}")
        page.wait(lambda d: d.find_element("id", "key-dialog").is_displayed(), "no key prompt")
        assert "needs an API key" in page.text("key-message")
        page.driver.find_element("id", "key-input").send_keys(token[:-1] + "x\n")
        page.wait(lambda d: "refused the key" in page.text("key-message"), "a bad key passed")
        page.driver.find_element("id", "key-input").send_keys(token)
        page.driver.find_element("id", "key-save").click()
        page.wait(lambda d: page.text("access") == "read-only", "the key was not used")
        page.driver.refresh()  # the key survives a reload of the tab
        page.wait(lambda d: page.text("access") == "read-only", "the key was forgotten")
        assert not page.driver.find_element("id", "key-dialog").is_displayed()
        page.drawn(nodes=4, edges=4)
        assert not page.driver.find_element("id", "write-actions").is_displayed()
    finally:
        keys.revoke(key.id)
        page.driver.execute_script("sessionStorage.clear()")


def main() -> None:
    """Save docs/explorer.png: the seeded memory, Paris's neighbourhood expanded twice."""
    paths = chromium()
    assert paths, "needs chromium and chromedriver"
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp) / "data"
        clock = Clock()
        settings = Settings(embedder="hash", data_dir=data_dir)
        with Memory.open(data_dir, settings=settings, clock=clock) as memory:
            ids = seed(memory, clock)
        driver = start_browser(paths)
        try:
            with LiveServer(create_app(settings, clock=clock)) as server:
                page = Explorer(server, clock, data_dir, ids, driver)
                page.open()
                driver.find_element("id", "search-input").send_keys("where does Ana live\n")
                page.wait(lambda d: "Ana lives in Paris" in page.text("results"), "no results")
                driver.find_element(
                    "css selector", f'#results button[data-id="{ids["paris"]}"]'
                ).click()
                page.drawn(nodes=4, edges=4)
                page.click_node(ids["lead"])
                page.drawn(nodes=5, edges=5)
                page.click_node(ids["paris"])
                driver.save_screenshot(str(ROOT / "docs" / "explorer.png"))
        finally:
            driver.quit()


if __name__ == "__main__":
    main()


def test_a_chunk_of_a_note_shows_its_file_and_reads_its_lines(page: Explorer) -> None:
    page.open()
    page.driver.find_element("id", "search-input").send_keys("tomatoes water\n")
    page.wait(lambda d: "The tomatoes need water" in page.text("results"), "no note found")
    page.driver.find_element("css selector", "#results button[data-id]").click()
    page.wait(lambda d: "Document" in page.text("details-fields"), "no document shown")
    assert f"Document\n{page.ids['garden']}, lines 1\u20134" in page.text("details-fields")
    page.driver.find_element("id", "document-read").click()
    page.wait(lambda d: page.text("document-lines") != "", "the lines never came")
    assert page.text("document-lines") == GARDEN.rstrip("\n")
