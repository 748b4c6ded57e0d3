/**
 * The word that marks a unit or plist as written by shardctl: install rewrites such a file (an
 * upgrade) and uninstall removes it; any other file at that path is an operator's and is left alone
 * unless `--force`.
 */
export const serviceMarker = "shardctl-managed";

export function isShardctlServiceFile(text: string): boolean {
  return text.includes(serviceMarker);
}
