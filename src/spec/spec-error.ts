/** The error thrown by the `load*` functions: every issue of the file, formatted, plus the issues themselves. */
import { ShardctlError, type FileReason, type SpecReason } from "../errors/index.js";
import { formatIssue } from "./issues.js";
import type { SpecIssue } from "./types.js";

export class SpecError extends ShardctlError {
  readonly issues: readonly SpecIssue[];

  /** `reason` is the spec reason, or the file reason when the file was refused before it was read. */
  constructor(reason: SpecReason | FileReason, issues: readonly SpecIssue[]) {
    super(reason, issues.map(formatIssue).join("\n"), { terminal: true });
    this.name = "SpecError";
    this.issues = issues;
  }
}
