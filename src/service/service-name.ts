import { createHash } from "node:crypto";
import { basename, dirname } from "node:path";
import type { ServicePlatform } from "./types.js";

/** Longest readable part of a slug, characters: unit names and labels stay short enough to type. */
const readableLength = 40;

/**
 * The slug of a watched directory: its parent's and its own name, lower-cased to [a-z0-9-], plus the
 * first 8 hex digits of the SHA-256 of its absolute path. Two directories get two services even when
 * their names agree (every checkout has a `clusters/`), and the same directory always gets the same
 * one. The path is hashed as given, not through symlinks: a deployment that swaps a `current` symlink
 * keeps its service.
 */
export function serviceSlug(dir: string): string {
  const hash = createHash("sha256").update(dir).digest("hex").slice(0, 8);
  const readable = `${basename(dirname(dir))}-${basename(dir)}`
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .slice(0, readableLength)
    .replace(/^-+|-+$/g, "");
  return readable === "" ? hash : `${readable}-${hash}`;
}

/** The unit name (`shardctl-<slug>.service`) or launchd label (`dev.shardctl.<slug>`) of a slug. */
export function serviceName(platform: ServicePlatform, slug: string): string {
  return platform === "systemd" ? `shardctl-${slug}.service` : `dev.shardctl.${slug}`;
}
