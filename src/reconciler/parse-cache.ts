/**
 * Parse the settings and each definition again only when their text changed. Every pass still
 * re-reads the files (level-triggered: the disk is the truth), but an idle daemon resyncing 1000
 * unchanged definitions every 30 s should not re-run TOML parsing and zod validation 1000 times.
 */
import {
  loadCluster,
  loadSettings,
  readClusterText,
  readSettingsText,
  parseCluster,
  parseSettings,
  SpecError,
  type ClusterSpec,
  type ParseResult,
  type Settings,
} from "../spec/index.js";

export class ParseCache {
  private settings: { file: string; text: string; value: Settings } | undefined;
  private readonly clusters = new Map<string, { text: string; settings: Settings; result: ParseResult<ClusterSpec> }>();

  /**
   * `pinned`: the state directory the daemon started with. Its ledger, its requests and the
   * health monitors it runs live there: a settings file edited (or checked out) to another one
   * while it runs keeps this one, and `moved` hears the one asked for (a restart moves it).
   */
  constructor(private readonly pinned?: { stateDir: string; moved: (asked: string) => void }) {}

  /** Like `loadSettings`; the same object while the file's text is unchanged. */
  async loadSettings(file: string): Promise<Settings> {
    const text = await readSettingsText(file).catch(() => undefined);
    // Unreadable: let loadSettings say why, with its reasons.
    if (text === undefined) return loadSettings(file);
    if (this.settings?.file === file && this.settings.text === text) return this.settings.value;
    const result = parseSettings(text, file);
    if (!result.ok) throw new SpecError("InvalidSettings", result.issues);
    let value = result.value;
    if (this.pinned !== undefined && value.daemon.stateDir !== this.pinned.stateDir) {
      this.pinned.moved(value.daemon.stateDir);
      value = { ...value, daemon: { ...value.daemon, stateDir: this.pinned.stateDir } };
    }
    this.settings = { file, text, value };
    this.clusters.clear();
    return value;
  }

  /** Like `loadCluster`; reused while the file's text and the settings object are unchanged. */
  async loadCluster(file: string, settings: Settings): Promise<ParseResult<ClusterSpec>> {
    const text = await readClusterText(file).catch(() => undefined);
    if (text === undefined) {
      this.clusters.delete(file);
      return loadCluster(file, settings);
    }
    const cached = this.clusters.get(file);
    if (cached !== undefined && cached.text === text && cached.settings === settings) return cached.result;
    const result = parseCluster(text, file, settings);
    this.clusters.set(file, { text, settings, result });
    return result;
  }

  /** The text of `file` that its last load parsed. */
  textOf(file: string): string | undefined {
    return this.clusters.get(file)?.text;
  }

  forget(file: string): void {
    this.clusters.delete(file);
  }
}
