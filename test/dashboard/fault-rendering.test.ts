/**
 * What the page shows during a fault, in real headless Chromium, from real statuses: the ones a
 * daemon composed on the two-stage test world while stage-0 was frozen (its peer names it), while a
 * restarted daemon adopted a cluster beside a frozen coordinator (Ready Unknown, then the death
 * naming the coordinator and the relaunch), and while node n2 was unobservable over SSH (its sshd
 * frozen). They were captured from the daemon's event stream, in order, into
 * fixtures/fault-statuses.json; here the dashboard's own server streams them to the page through
 * a status feed, so each state is shown exactly, for as long as the test looks at it.
 */
import { readFileSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { Dashboard } from "../../src/dashboard/index.js";
import { StatusFeed, unobservableConditions, type ClusterStatus } from "../../src/reconciler/index.js";
import { launchChromium } from "../support/chromium.js";
import { repoRoot } from "../reconciler/daemon-fixture.js";
import { startFeedDashboard } from "./support.js";

interface Fixtures {
  healthy: ClusterStatus;
  stageSilentFirstRecord: ClusterStatus;
  stageSilentNamed: ClusterStatus;
  adoptedUnknown: ClusterStatus;
  unobservable: ClusterStatus;
  frozenCoordinatorSequence: ClusterStatus[];
}
const fixtures = JSON.parse(readFileSync(join(import.meta.dirname, "fixtures/fault-statuses.json"), "utf8")) as Fixtures;
const name = fixtures.healthy.cluster;
/** Screenshots of each state, for a person to look at (gitignored). */
const artefacts = join(repoRoot, "test-artifacts/dashboard");

let feed: StatusFeed;
let dashboard: Dashboard;
let browser: Browser;
let page: Page;

beforeAll(async () => {
  await mkdir(artefacts, { recursive: true });
  feed = new StatusFeed();
  dashboard = await startFeedDashboard(feed, name);
  feed.publish(fixtures.healthy);
  browser = await launchChromium();
  // bypassCSP: the test evaluates its probes as strings, which the page's policy (no eval) refuses.
  page = await browser.newPage({ viewport: { width: 1280, height: 900 }, colorScheme: "light", bypassCSP: true });
  await page.goto(`${dashboard.url}#/clusters/${name}`);
  await page.locator("#cluster-title").waitFor();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await dashboard?.close();
});

async function shot(name: string): Promise<void> {
  await page.screenshot({ path: join(artefacts, `fault-${name}.png`), fullPage: true });
}

/** Evaluate browser-side JavaScript (a string: this project's tests compile without the DOM's types). */
function inPage<T>(script: string): Promise<T> {
  return page.evaluate(script) as Promise<T>;
}

/** Publish `status` and wait until the page shows it (its health, its Ready message). */
async function show(status: ClusterStatus): Promise<void> {
  feed.publish(status);
  const ready = status.conditions.find((c) => c.type === "Ready")!;
  await page.waitForFunction(
    `document.querySelector("h1 [data-testid=health-badge]")?.dataset.health === ${JSON.stringify(status.health)} &&
      (document.querySelector("[data-testid=ready-line]")?.textContent ?? "").includes(${JSON.stringify(ready.message)})`,
    undefined,
    { timeout: 10_000, polling: 50 },
  );
}

/** The colour a CSS custom property (e.g. "--bad") resolves to, as getComputedStyle spells colours. */
function colourOf(variable: string): Promise<string> {
  return inPage(`(() => {
    const probe = document.createElement("span");
    probe.style.color = "var(${variable})";
    document.body.append(probe);
    const colour = getComputedStyle(probe).color;
    probe.remove();
    return colour;
  })()`);
}

/** The computed colour of the first element `selector` finds. */
function colourAt(selector: string): Promise<string> {
  return inPage(`getComputedStyle(document.querySelector(${JSON.stringify(selector)})).color`);
}

/** The status cell of condition `type` in the conditions table: its text and colour. */
function conditionCell(type: string): Promise<{ text: string; colour: string }> {
  return inPage(`(() => {
    const row = [...document.querySelectorAll("section[aria-labelledby=h-conditions] tbody tr")].find((r) => r.querySelector("th")?.textContent === ${JSON.stringify(type)});
    const cell = row.querySelectorAll("td")[0];
    return { text: cell.textContent, colour: getComputedStyle(cell).color };
  })()`);
}

describe("the cluster page during a fault", () => {
  test("Ready Unknown (a restarted daemon found it running, not yet seen serving) reads as unknown, neither Ready nor Not ready", async () => {
    await show(fixtures.adoptedUnknown);
    const line = page.locator("[data-testid=ready-line]");
    const text = (await line.textContent())!;
    expect(text).toMatch(/^Ready unknown: ProbeUnanswered found running, not yet seen serving: http:\/\/\S+\/health did not answer/);
    expect(await line.getAttribute("data-status")).toBe("Unknown");
    expect(await colourAt("[data-testid=ready-line]")).toBe(await colourOf("--warn"));
    await shot("ready-unknown");
  });

  test("a coordinator whose /health did not answer is unknown, not dead: amber, and its card says so in words", async () => {
    await show(fixtures.adoptedUnknown);
    const card = page.locator("[data-testid=coordinator-card]");
    expect(await card.getAttribute("data-state")).toBe("unknown");
    expect(await card.locator(".pill").textContent()).toBe("Unknown");
    expect(await card.textContent()).toContain("health unknown: /health did not answer");
    expect(await colourAt("[data-testid=coordinator-card] .pill")).toBe(await colourOf("--warn"));
    // Its process is there: the cards of both stages say they are alive.
    await show(fixtures.healthy);
    expect(await card.getAttribute("data-state")).toBe("healthy");
  });

  test("a Degraded cluster says why at the top: the node it cannot observe, while the headline still says Ready", async () => {
    await show(fixtures.unobservable);
    const why = page.locator("[data-testid=why]");
    expect(await why.getAttribute("aria-label")).toBe("Why Degraded");
    const text = (await why.textContent())!;
    expect(text).toMatch(/StagesListening Unknown: NodeUnobservable node n2 \(stage-1\) is unobservable over SSH: .*; the pipeline still serves, reconnecting/);
    // Above the stages, where the eye lands first.
    expect(
      await inPage(`document.querySelector("[data-testid=why]").compareDocumentPosition(document.querySelector("#h-stages")) & Node.DOCUMENT_POSITION_FOLLOWING`),
    ).toBeTruthy();
    await shot("degraded-unobservable");
    await show(fixtures.adoptedUnknown);
    expect(await why.textContent()).toMatch(/CoordinatorHealthy Unknown: ProbeUnanswered http:\/\/\S+\/health did not answer/);
    // A Healthy cluster has nothing to explain.
    await show(fixtures.healthy);
    expect(await why.count()).toBe(0);
  });

  test("conditions: Unknown has a tone of its own, and Stalled or Reconciling False is not painted as a fault", async () => {
    await show(fixtures.unobservable);
    const [good, bad, warn, text] = [await colourOf("--good"), await colourOf("--bad"), await colourOf("--warn"), await colourOf("--text")];
    expect(await conditionCell("StagesListening")).toEqual({ text: "Unknown", colour: warn });
    expect(await conditionCell("Ready")).toEqual({ text: "True", colour: good });
    // False is these conditions' quiet state: the text colour, not the red of a fault.
    expect(await conditionCell("Stalled")).toEqual({ text: "False", colour: text });
    expect(await conditionCell("Reconciling")).toEqual({ text: "False", colour: text });
    // Registration off (register = false) is no fault either.
    expect(await conditionCell("Registered")).toEqual({ text: "False", colour: text });
    // A death: Ready False is.
    await show(fixtures.stageSilentNamed);
    expect(await conditionCell("Ready")).toEqual({ text: "False", colour: bad });
    expect(await conditionCell("Reconciling")).toMatchObject({ text: "True" });
  });

  test("during the relaunch after a death, the cards follow the new launch's timeline, not the death, as `shardctl status` does", async () => {
    const died = fixtures.stageSilentNamed;
    const message = "nothing serves this revision yet: its 2 stages listen; its coordinator is starting";
    const relaunching: ClusterStatus = {
      ...died,
      health: "Progressing",
      conditions: died.conditions.map((c) => (c.type === "Ready" ? { ...c, reason: "Launching", message } : c)),
      timeline: [
        { at: "2026-12-02T03:45:34.100Z", step: "launch-started", detail: "revision 1f79783203d3" },
        { at: "2026-12-02T03:45:34.200Z", step: "stage-0-started", detail: "pid 41000 on n1, layers [0, 2)" },
        { at: "2026-12-02T03:45:34.210Z", step: "stage-1-started", detail: "pid 41010 on n2, layers [2, 4)" },
        { at: "2026-12-02T03:45:34.700Z", step: "stage-0-listening", detail: "127.0.0.2:39661" },
        { at: "2026-12-02T03:45:34.720Z", step: "stage-1-listening", detail: "127.0.0.3:39661" },
        { at: "2026-12-02T03:45:34.750Z", step: "coordinator-started", detail: "pid 41020 on local" },
      ],
    };
    // Before the relaunch starts anything, both members the death names are dead.
    await show(died);
    const cards = page.locator("[data-testid=stage-card]");
    expect(await cards.evaluateAll((els) => els.map((e) => e.getAttribute("data-state")))).toEqual(["dead", "dead"]);
    await show(relaunching);
    expect(await cards.evaluateAll((els) => els.map((e) => e.getAttribute("data-state")))).toEqual(["starting", "starting"]);
    expect(await cards.nth(0).locator(".pill").textContent()).toBe("Listening");
    expect(await cards.nth(0).textContent()).toContain("pid 41000");
    expect(await cards.nth(1).textContent()).toContain("listening on 127.0.0.3:39661");
    const coordinator = page.locator("[data-testid=coordinator-card]");
    expect(await coordinator.getAttribute("data-state")).toBe("starting");
    expect(await coordinator.textContent()).toContain("pid 41020");
    expect(await colourAt("[data-testid=stage-card] .pill")).toBe(await colourOf("--busy"));
    await shot("relaunching");
    // A stage seen stopped holds the launch: amber, in words.
    const held: ClusterStatus = {
      ...relaunching,
      timeline: [...relaunching.timeline.slice(0, 4), { at: "2026-12-02T03:45:34.730Z", step: "stage-1-paused", detail: "pid 41010 on n2" }],
    };
    feed.publish(held);
    await page.waitForFunction(`document.querySelectorAll("[data-testid=stage-card]")[1]?.dataset.state === "degraded"`, undefined, { timeout: 10_000, polling: 50 });
    expect(await cards.nth(1).locator(".pill").textContent()).toBe("Stopped");
    // The launch's last step is written before the daemon has looked at what it started (no cards
    // yet): its members stay as the launch left them, not dead, until the cards come.
    const complete: ClusterStatus = {
      ...relaunching,
      conditions: relaunching.conditions.map((c) => (c.type === "Ready" ? { ...c, message: "nothing serves this revision yet: its launch is complete" } : c)),
      timeline: [
        ...relaunching.timeline,
        { at: "2026-12-02T03:45:35.100Z", step: "coordinator-listening", detail: "127.0.0.1:39700" },
        { at: "2026-12-02T03:45:35.300Z", step: "coordinator-healthy" },
        { at: "2026-12-02T03:45:35.400Z", step: "readiness-probe-passed" },
        { at: "2026-12-02T03:45:35.450Z", step: "ready" },
      ],
    };
    await show(complete);
    expect(await cards.evaluateAll((els) => els.map((e) => e.getAttribute("data-state")))).toEqual(["starting", "starting"]);
    expect(await cards.nth(1).locator(".pill").textContent()).toBe("Listening");
    expect(await coordinator.locator(".pill").textContent()).toBe("Generates");
    // Leave the page on a status no later test's Ready message is a prefix of: `show` would take
    // this one's "nothing serves this revision yet: …" for the next one's and look too soon.
    await show(fixtures.healthy);
  });

  test("a node whose staging failed says why on its own row, in the colour of a failure; a node that staged does not", async () => {
    const message = "n2 (127.0.0.3:22): connect timed out after 10000 ms";
    const failed: ClusterStatus = {
      ...fixtures.healthy,
      health: "Progressing",
      conditions: fixtures.healthy.conditions.map((c) =>
        c.type === "Ready"
          ? { ...c, status: "False", reason: "Staging", message: "nothing serves this revision yet" }
          : c.type === "Staged"
            ? { ...c, status: "False", reason: "NodeUnreachable", message: `staging failed on n2: ${message}` }
            : c,
      ),
      staging: [
        { node: "n1", state: "present", bytesDone: 4096, bytesTotal: 4096 },
        { node: "n2", state: "failed", bytesDone: 1024, bytesTotal: 4096, reason: "NodeUnreachable", message },
      ],
    };
    await show(failed);
    const rows = page.locator("[data-testid=staging-row]");
    expect(await rows.evaluateAll((els) => els.map((e) => e.getAttribute("data-state")))).toEqual(["present", "failed"]);
    expect(await rows.nth(1).locator("[data-testid=staging-why]").textContent()).toBe(`NodeUnreachable ${message}`);
    expect(await rows.nth(0).locator("[data-testid=staging-why]").count()).toBe(0);
    const bad = await colourOf("--bad");
    expect(await colourAt("[data-testid=staging-row][data-state=failed] [data-testid=staging-why]")).toBe(bad);
    expect(await colourAt("[data-testid=staging-row][data-state=failed] .staging-state")).toBe(bad);
    expect(await colourAt("[data-testid=staging-row][data-state=present] .staging-state")).not.toBe(bad);
    await shot("staging-failed");
  });

  test("on a narrow screen the conditions table scrolls sideways from the keyboard, and Ready is a live region", async () => {
    await show(fixtures.stageSilentNamed);
    await page.setViewportSize({ width: 420, height: 900 });
    try {
      const region = page.getByRole("region", { name: "Conditions table" });
      const wide = await region.evaluate((el) => el.scrollWidth > el.clientWidth);
      expect(wide).toBe(true);
      await region.focus();
      expect(await region.evaluate((el) => el === el.ownerDocument.activeElement)).toBe(true);
      for (let i = 0; i < 5; i++) await page.keyboard.press("ArrowRight");
      await page.waitForFunction(`document.querySelector("[role=region][aria-label='Conditions table']").scrollLeft > 0`, undefined, { timeout: 5_000 });
      for (const name of ["Last passes table"]) expect(await page.getByRole("region", { name }).getAttribute("tabindex")).toBe("0");
      // Scrolled to the end of the page, the connection's word (which says when what is shown is
      // old) is still in view at the top.
      await page.evaluate("window.scrollTo(0, document.body.scrollHeight)");
      expect(await inPage<number>("window.scrollY")).toBeGreaterThan(0);
      expect(await inPage<number>(`document.querySelector("[data-testid=connection]").getBoundingClientRect().top`)).toBeGreaterThanOrEqual(0);
      await page.evaluate("window.scrollTo(0, 0)");
    } finally {
      await page.setViewportSize({ width: 1280, height: 900 });
    }
    expect(await page.locator("[data-testid=ready-line]").getAttribute("role")).toBe("status");
  });

  test("a death marks every member its message names: the one that went silent, and the peer that exited because of it", async () => {
    const cards = page.locator("[data-testid=stage-card]");
    await show(fixtures.stageSilentNamed);
    expect(await cards.evaluateAll((els) => els.map((e) => e.getAttribute("data-state")))).toEqual(["dead", "dead"]);
    expect(await cards.nth(0).textContent()).toMatch(/StageDied: stage-0 on n1 stopped answering \(stage-1 heard nothing from it for \d+ ms\)$/);
    expect(await cards.nth(1).textContent()).toMatch(/StageDied: stage-1 on n2: pid \d+ exited because its upstream went silent \(with status 69\)$/);
    // The whole message, wrapped, not cut: the culprit is its first words.
    const line = page.locator("[data-testid=ready-line]");
    expect(await line.evaluate((e) => e.scrollWidth <= e.clientWidth)).toBe(true);
    await shot("death-named");
    // The coordinator went silent: no coordinator runs any more, but its card says it was the culprit.
    const coordinatorDeath = fixtures.frozenCoordinatorSequence[3]!;
    expect(coordinatorDeath.conditions.find((c) => c.type === "Ready")!.message).toMatch(/^coordinator on local stopped answering/);
    await show(coordinatorDeath);
    expect(await cards.evaluateAll((els) => els.map((e) => e.getAttribute("data-state")))).toEqual(["dead", "down"]);
    expect(await cards.nth(0).textContent()).toMatch(/StageDied: stage-0 on n1: pid \d+ is no longer running \(exited with status 1\)$/);
    const coordinator = page.locator("[data-testid=coordinator-card]");
    expect(await coordinator.getAttribute("data-state")).toBe("dead");
    expect(await coordinator.textContent()).toMatch(/StageDied: coordinator on local stopped answering \(stage-1 heard nothing from it for \d+ ms\)$/);
  });

  test("a cluster stalled on its spent budget keeps the members of the death that spent it marked dead", async () => {
    const cards = page.locator("[data-testid=stage-card]");
    const death = fixtures.stageSilentNamed;
    const spent = `launched 3 times at this revision (budget 3); the last failure: StageDied: ${death.restarts!.evidence.at(-1)!.message}. Fix the cause and edit the definition, or run \`shardctl reconcile ${name}\``;
    const stalled: ClusterStatus = {
      ...death,
      health: "Stalled",
      conditions: death.conditions.map((c) =>
        c.type === "Ready" || c.type === "Stalled"
          ? { ...c, status: c.type === "Ready" ? "False" : "True", reason: "RestartBudgetExhausted", message: spent }
          : c.type === "Reconciling"
            ? { ...c, status: "False", reason: "RestartBudgetExhausted", message: spent }
            : c,
      ),
      lastError: { reason: "RestartBudgetExhausted", message: spent, at: death.lastError!.at },
      restarts: { ...death.restarts!, count: 3 },
    };
    await show(stalled);
    expect(await cards.evaluateAll((els) => els.map((e) => e.getAttribute("data-state")))).toEqual(["dead", "dead"]);
    expect(await cards.nth(0).textContent()).toMatch(/StageDied: stage-0 on n1 stopped answering/);
    // Stopped afterwards, the cards say stopped: the old evidence marks nothing.
    await show({
      ...stalled,
      health: "Stopped",
      desired: "stopped",
      conditions: stalled.conditions.map((c) => (c.type === "Ready" ? { ...c, reason: "Stopped", message: "stopped" } : c)),
      lastError: undefined,
    });
    expect(await cards.evaluateAll((els) => els.map((e) => e.getAttribute("data-state")))).toEqual(["down", "down"]);
  });

  test("statuses 20 ms apart through a death and a relaunch: no card forgets the death before the relaunch brings it back, and the last status is shown whole", async () => {
    const [first, ...rest] = fixtures.frozenCoordinatorSequence;
    await show(first!);
    await inPage(`(() => {
      window.__seen = [];
      const record = () => {
        const cards = [...document.querySelectorAll("[data-testid=stage-card]")].map((c) => c.dataset.state).join(",");
        const coordinator = document.querySelector("[data-testid=coordinator-card]")?.dataset.state ?? "none";
        const entry = document.querySelector("h1 [data-testid=health-badge]").dataset.health + "|" + cards + "|" + coordinator;
        if (window.__seen.at(-1) !== entry) window.__seen.push(entry);
      };
      new MutationObserver(record).observe(document.body, { subtree: true, childList: true, attributes: true, characterData: true });
      record();
    })()`);
    for (const status of rest) {
      feed.publish(status);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await show(rest.at(-1)!);
    const seen = await inPage<string[]>("window.__seen");
    expect(seen[0]).toBe("Healthy|healthy,healthy|healthy");
    expect(seen.at(-1)).toBe("Healthy|healthy,healthy|healthy");
    const dead = seen.findIndex((s) => s.split("|")[1]!.startsWith("dead"));
    expect(dead, seen.join(" → ")).toBeGreaterThan(0);
    // From the death on, stage-0 is dead until the relaunch brings its card back healthy.
    for (const s of seen.slice(dead, -1)) expect(s.split("|")[1], seen.join(" → ")).toMatch(/^dead,/);
  });

  test("a restart's log tail wraps in its box: the engine's JSON lines are read whole, the silent peer's name included, without scrolling sideways", async () => {
    await show(fixtures.stageSilentNamed);
    const evidence = page.locator(".evidence li").last();
    await evidence.locator("summary").click();
    const tail = evidence.locator("pre");
    expect(await tail.textContent()).toContain('"peer":"stage-0","link":"upstream"');
    expect(await tail.evaluate((e) => [e.scrollWidth, e.clientWidth])).toSatisfy(([scroll, client]: number[]) => scroll! <= client!);
    // Keyboard: the summary is a control that opens and closes it.
    await evidence.locator("summary").focus();
    await page.keyboard.press("Enter");
    expect(await evidence.locator("details").getAttribute("open")).toBeNull();
  });

  test("a stage on a node the daemon cannot observe is not shown Healthy: its card says its node is unobservable", async () => {
    await show(fixtures.unobservable);
    const cards = page.locator("[data-testid=stage-card]");
    // The status's stage cards still hold the last sight of stage-1 (alive, listening); its condition says n2 is unobservable.
    expect(fixtures.unobservable.stages[1]!.liveness).toBe("alive");
    expect(await cards.evaluateAll((els) => els.map((e) => e.getAttribute("data-state")))).toEqual(["healthy", "degraded"]);
    expect(await cards.nth(1).locator(".pill").textContent()).toBe("Unobservable");
    expect(await cards.nth(1).textContent()).toContain("node n2 does not answer over SSH: last seen alive, transport listening");
    expect(await page.locator("[data-testid=coordinator-card]").getAttribute("data-state")).toBe("healthy");
    await show(fixtures.healthy);
    expect(await cards.evaluateAll((els) => els.map((e) => e.getAttribute("data-state")))).toEqual(["healthy", "healthy"]);
  });

  test("a cluster the daemon is cut off from is not shown Healthy: every stage card says its node does not answer the daemon", async () => {
    // The last real sight of the cards (all alive), under the conditions the daemon writes when it
    // reaches none of the cluster's nodes (composed by its own code).
    const cut = unobservableConditions(new Map(), { cluster: name, nodes: ["n1", "n2"], since: new Date().toISOString(), graceMs: 300_000 });
    const conditions = fixtures.healthy.conditions.map((c) => {
      const update = cut[c.type as keyof typeof cut];
      return update === undefined ? c : { ...c, ...update };
    });
    await show({ ...fixtures.healthy, health: "Degraded", conditions });
    const cards = page.locator("[data-testid=stage-card]");
    expect(fixtures.healthy.stages.map((s) => s.liveness)).toEqual(["alive", "alive"]);
    expect(await cards.evaluateAll((els) => els.map((e) => e.getAttribute("data-state")))).toEqual(["degraded", "degraded"]);
    expect(await cards.nth(0).locator(".pill").textContent()).toBe("Unobservable");
    expect(await cards.nth(1).textContent()).toContain("node n2 does not answer the daemon, nor does any node of the cluster");
    await show(fixtures.healthy);
    expect(await cards.evaluateAll((els) => els.map((e) => e.getAttribute("data-state")))).toEqual(["healthy", "healthy"]);
  });

  test("the layer bar writes each stage's layers as its card and `shardctl status` do, half-open: [first, end)", async () => {
    await show(fixtures.healthy);
    const bar = await page.locator("[data-testid=layer-bar] .segment-detail").allTextContents();
    const cards = await page
      .locator("[data-testid=stage-card] dl")
      .evaluateAll((lists) => lists.map((dl) => [...dl.querySelectorAll("dt")].find((dt) => dt.textContent === "layers")?.nextElementSibling?.textContent));
    expect(bar).toEqual(fixtures.healthy.plan!.stages.map((s) => `layers [${s.layers[0]}, ${s.layers[1]})`));
    expect(bar).toEqual(cards.map((c) => `layers ${c}`));
  });

  test("the clusters list says why a cluster is not Healthy, in its health cell", async () => {
    await show(fixtures.unobservable);
    await page.goto(`${dashboard.url}#/`);
    const health = page.locator(`tr[data-cluster=${name}] td`).nth(1);
    await health.locator("[data-testid=health-badge]").waitFor();
    expect(await health.textContent()).toBe("Degraded StagesListening Unknown: NodeUnobservable");
    expect(await health.locator("[data-testid=health-why]").getAttribute("title")).toMatch(/^node n2 \(stage-1\) is unobservable over SSH/);
    feed.publish(fixtures.adoptedUnknown);
    await page.waitForFunction(`document.querySelector("[data-testid=health-why]")?.textContent === "Ready Unknown: ProbeUnanswered"`, undefined, { timeout: 10_000 });
    feed.publish(fixtures.stageSilentNamed);
    await page.waitForFunction(`document.querySelector("[data-testid=health-why]")?.textContent === "Ready False: StageDied"`, undefined, { timeout: 10_000 });
    feed.publish(fixtures.healthy);
    await page.waitForFunction(`document.querySelector("[data-testid=health-why]") === null`, undefined, { timeout: 10_000 });
    // A stage whose node does not answer is counted apart in STAGES, neither up nor down.
    const count = page.locator(`tr[data-cluster=${name}] [data-testid=stage-count]`);
    expect((await count.textContent())!.trim()).toBe("2/2");
    feed.publish({ ...fixtures.healthy, stages: fixtures.healthy.stages.map((s) => (s.index === 1 ? { ...s, alive: false, liveness: "unknown" as const } : s)) });
    await page.waitForFunction(`document.querySelector("tr[data-cluster=${name}] [data-testid=stage-count]")?.textContent.trim() === "1/2 (1 unknown)"`, undefined, {
      timeout: 10_000,
    });
    feed.publish(fixtures.healthy);
    await page.goto(`${dashboard.url}#/clusters/${name}`);
    await page.locator("#cluster-title").waitFor();
  });

  test("during a teardown the stages without cards are being stopped, not 'not running'", async () => {
    const message = "tearing down revision 1f79783203d3";
    const tearing: ClusterStatus = {
      ...fixtures.healthy,
      health: "Progressing",
      stages: [],
      conditions: fixtures.healthy.conditions.map((c) =>
        c.type === "Ready"
          ? { ...c, status: "False" as const, reason: "TearingDown", message }
          : c.type === "StagesListening"
            ? { ...c, status: "False" as const, reason: "TearingDown", message: `${message}: the stages are being stopped` }
            : c,
      ),
    };
    await show(tearing);
    const cards = page.locator("[data-testid=stage-card]");
    expect(await cards.evaluateAll((els) => els.map((e) => e.querySelector("p")?.textContent))).toEqual(["being stopped", "being stopped"]);
    await show(fixtures.healthy);
  });

  test("a cluster whose definition is gone while it still runs (a prune held up or refused) says so in the list and on its page", async () => {
    feed.publish({ ...fixtures.healthy, definitionRemoved: true });
    const facts = page.locator("[data-testid=cluster-facts]");
    await page.waitForFunction(
      `(document.querySelector("[data-testid=cluster-facts]")?.textContent ?? "").includes("(removed: the daemon tears the cluster down)")`,
      undefined,
      {
        timeout: 10_000,
      },
    );
    expect(await facts.textContent()).toContain(`${fixtures.healthy.file} (removed: the daemon tears the cluster down) · desired running`);
    await page.goto(`${dashboard.url}#/`);
    const tag = page.locator(`tr[data-cluster=${name}] [data-testid=definition-removed-tag]`);
    await tag.waitFor();
    expect((await tag.textContent())!.trim()).toBe("definition removed");
    // Back (a definition restored): no mark.
    feed.publish(fixtures.healthy);
    await tag.waitFor({ state: "detached", timeout: 10_000 });
    await page.goto(`${dashboard.url}#/clusters/${name}`);
    await page.locator("#cluster-title").waitFor();
    expect(await facts.textContent()).not.toContain("removed");
  });
});
