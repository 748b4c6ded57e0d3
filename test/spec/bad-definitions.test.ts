/**
 * Every file under fixtures/bad (cluster definitions) and fixtures/bad-settings is invalid; its
 * trailing `# expect:` comment lines are the exact messages, in order, that validation must print.
 */
import { readdirSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { formatIssue, parseCluster, parseSettings } from "../../src/spec/index.js";
import { fixtureSettings, fixtures } from "./support.js";

function expectations(text: string): string[] {
  return [...text.matchAll(/^# expect: (.*)$/gm)].map((match) => match[1] as string);
}

const clusterFiles = readdirSync(`${fixtures}bad`)
  .filter((f) => f.endsWith(".toml"))
  .sort();
const settingsFiles = readdirSync(`${fixtures}bad-settings`)
  .filter((f) => f.endsWith(".toml"))
  .sort();

describe("bad cluster definitions", () => {
  const settings = fixtureSettings();

  it("has at least 30 of them", () => {
    expect(clusterFiles.length).toBeGreaterThanOrEqual(30);
  });

  it.each(clusterFiles)("%s", (name) => {
    const text = readFileSync(`${fixtures}bad/${name}`, "utf8");
    const expected = expectations(text);
    expect(expected.length).toBeGreaterThan(0);
    const result = parseCluster(text, `clusters/${name}`, settings);
    expect(result.ok).toBe(false);
    expect(result.issues.map(formatIssue)).toEqual(expected);
  });
});

describe("bad settings", () => {
  it.each(settingsFiles)("%s", (name) => {
    const text = readFileSync(`${fixtures}bad-settings/${name}`, "utf8");
    const expected = expectations(text);
    expect(expected.length).toBeGreaterThan(0);
    const result = parseSettings(text, `shardctl/${name}`);
    expect(result.ok).toBe(false);
    expect(result.issues.map(formatIssue)).toEqual(expected);
  });
});
