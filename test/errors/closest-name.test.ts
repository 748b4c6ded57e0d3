/** closestName: the guess behind "did you mean" in unknown-key and unknown-command messages. */
import { describe, expect, it } from "vitest";
import { closestName } from "../../src/errors/index.js";

const modelKeys = ["id", "revision", "source", "context_length", "max_sequences", "files", "verify"];

describe("closestName", () => {
  it("finds the same name in another spelling", () => {
    expect(closestName("context-length", modelKeys)).toBe("context_length");
    expect(closestName("contextLength", modelKeys)).toBe("context_length");
    expect(closestName("Context Length", modelKeys)).toBe("context_length");
  });

  it("finds a name a few edits away, swaps of neighbours counting as one", () => {
    expect(closestName("max_sequence", modelKeys)).toBe("max_sequences");
    expect(closestName("revison", modelKeys)).toBe("revision");
    expect(closestName("verfiy", modelKeys)).toBe("verify");
    expect(closestName("treads", ["threads", "tokens"])).toBe("threads");
  });

  it("guesses nothing when nothing is close", () => {
    expect(closestName("quantization", modelKeys)).toBeUndefined();
    expect(closestName("size", modelKeys)).toBeUndefined();
    expect(closestName("x", modelKeys)).toBeUndefined();
    expect(closestName("deploy", ["status", "daemon", "plan"])).toBeUndefined();
    expect(closestName("anything", [])).toBeUndefined();
    // A very long name is near nothing, and is not compared letter by letter.
    expect(closestName(`max_sequences${"s".repeat(100)}`, modelKeys)).toBeUndefined();
  });

  it("takes the only name a name cut short begins, when none is a few edits away", () => {
    const nodeKeys = ["host", "user", "port", "identity_file", "model_dir", "memory", "memory_limit"];
    expect(closestName("identity", nodeKeys)).toBe("identity_file");
    expect(closestName("model", nodeKeys)).toBe("model_dir");
    // Two names begin it: no guess; a mere syllable: none either.
    expect(closestName("memor", ["memory_size", "memory_limit"])).toBeUndefined();
    expect(closestName("ide", nodeKeys)).toBeUndefined();
  });

  it("takes the nearest of several", () => {
    expect(closestName("statsu", ["start", "status", "state"])).toBe("status");
    // A tie goes to the first allowed name.
    expect(closestName("stat", ["start", "state"])).toBe("start");
  });
});
