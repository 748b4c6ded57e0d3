import { describe, expect, it } from "vitest";
import { createRouteTable } from "../../src/router/route-table.js";

const entry = (name: string, models: string[], weight?: number) => ({ name, url: `http://127.0.0.1/${name}`, models, weight });

function firstPicks(table: ReturnType<typeof createRouteTable>, model: string, count: number): string[] {
  return Array.from({ length: count }, () => table.candidates(model)[0]?.name ?? "-");
}

describe("route table", () => {
  it("round-robins evenly without weights and offers the others as fail-over", () => {
    const table = createRouteTable([entry("a", ["m"]), entry("b", ["m"]), entry("c", ["m", "n"])]);
    expect(firstPicks(table, "m", 6)).toEqual(["a", "b", "c", "a", "b", "c"]);
    expect(table.candidates("m").map((backend) => backend.name)).toEqual(["a", "b", "c"]);
    expect(table.candidates("n").map((backend) => backend.name)).toEqual(["c"]);
    expect(table.candidates("unknown")).toEqual([]);
  });

  it("spreads by weight, smoothly", () => {
    const table = createRouteTable([entry("heavy", ["m"], 3), entry("light", ["m"], 1)]);
    const picks = firstPicks(table, "m", 8);
    expect(picks.filter((name) => name === "heavy")).toHaveLength(6);
    // Smooth WRR never sends the light backend two in a row nor starves it for four.
    expect(picks.join(",")).not.toContain("light,light");
  });

  it("passes over a backend cooling off, and still offers it last; markUp restores it", () => {
    let now = 1000;
    const table = createRouteTable([entry("a", ["m"]), entry("b", ["m"])], () => now);
    table.markDown("a", 2000);
    expect(firstPicks(table, "m", 3)).toEqual(["b", "b", "b"]);
    expect(table.candidates("m").map((backend) => backend.name)).toEqual(["b", "a"]);
    now += 2001;
    expect(new Set(firstPicks(table, "m", 2))).toEqual(new Set(["a", "b"]));
    table.markDown("a", 2000);
    table.markDown("b", 2000);
    expect(table.candidates("m").map((backend) => backend.name)).toEqual(["a", "b"]);
    table.markUp("b");
    expect(firstPicks(table, "m", 2)).toEqual(["b", "b"]);
  });

  it("lists each model once with the backends that serve it, sorted", () => {
    const table = createRouteTable([entry("a", ["z", "m"]), entry("b", ["m"])]);
    expect(table.models()).toEqual([
      { id: "m", backends: ["a", "b"] },
      { id: "z", backends: ["a"] },
    ]);
  });
});
