/**
 * The plan of a definition that is not running (or not committed yet): paste or upload its TOML and
 * the daemon plans it with its own settings and planner. Read-only: nothing is written anywhere.
 */
import { useState } from "preact/hooks";
import type { PlanPreviewView } from "../status-types.js";
import { LayerBar, MemoryFit, PlanWarnings } from "./plan.js";

export interface PlanPreviewProps {
  onPreview: (toml: string, name: string, probe: boolean) => Promise<{ preview?: PlanPreviewView; problem?: string }>;
}

export function PlanPreviewPage({ onPreview }: PlanPreviewProps) {
  const [toml, setToml] = useState("");
  const [name, setName] = useState("preview");
  const [probe, setProbe] = useState(false);
  const [busy, setBusy] = useState(false);
  const [result, setResult] = useState<{ preview?: PlanPreviewView; problem?: string }>({});
  const submit = async (event: Event): Promise<void> => {
    event.preventDefault();
    setBusy(true);
    setResult(await onPreview(toml, name, probe));
    setBusy(false);
  };
  const preview = result.preview;
  return (
    <section aria-labelledby="h-preview">
      <h1 id="h-preview">Plan preview</h1>
      <p class="muted">Paste or upload a cluster definition: the daemon plans it as it would plan clusters/&lt;name&gt;.toml. Nothing is written.</p>
      <form onSubmit={(e) => void submit(e)} class="preview-form">
        <label class="block">
          Definition (TOML)
          <textarea
            rows={14}
            spellcheck={false}
            value={toml}
            onInput={(e) => setToml((e.currentTarget as HTMLTextAreaElement).value)}
            data-testid="preview-toml"
            required
          />
        </label>
        <div class="row">
          <label>
            Upload a file{" "}
            <input
              type="file"
              accept=".toml,text/plain"
              onChange={async (e) => {
                const file = (e.currentTarget as HTMLInputElement).files?.[0];
                if (file !== undefined) {
                  setToml(await file.text());
                  setName(file.name.replace(/\.toml$/, "") || "preview");
                }
              }}
            />
          </label>
          <label>
            Planned as{" "}
            <input
              value={name}
              size={16}
              onInput={(e) => setName((e.currentTarget as HTMLInputElement).value)}
              pattern="[a-z0-9][a-z0-9\-]{0,62}"
              data-testid="preview-name"
              title="a cluster name: lowercase letters, digits and hyphens, starting with a letter or digit, at most 63 characters"
              required
            />
          </label>
          <label>
            <input type="checkbox" checked={probe} onChange={(e) => setProbe((e.currentTarget as HTMLInputElement).checked)} /> probe the nodes (budgets as the daemon
            plans)
          </label>
          <button type="submit" disabled={busy} data-testid="preview-submit">
            {busy ? "Planning…" : "Preview the plan"}
          </button>
        </div>
      </form>
      <div role="status" aria-live="polite" data-testid="preview-result">
        {result.problem === undefined ? null : <p class="error-line">{result.problem}</p>}
        {preview === undefined ? null : (
          <div>
            <h2>
              {preview.cluster}: {preview.feasible ? "feasible" : "not feasible"}
            </h2>
            {preview.model === undefined ? null : (
              <p class="muted small">
                {preview.model.family} · {preview.model.layers} layers · {preview.model.dtype} · {preview.model.source}
              </p>
            )}
            {preview.issues.length === 0 ? null : (
              <ul class="notes">
                {preview.issues.map((i) => (
                  <li key={i}>
                    <code>{i}</code>
                  </li>
                ))}
              </ul>
            )}
            {preview.errors.length === 0 ? null : (
              <ul class="notes">
                {preview.errors.map((e) => (
                  <li key={e.reason + e.message}>
                    <code>{e.reason}</code> {e.message}
                  </li>
                ))}
              </ul>
            )}
            {preview.plan === undefined ? null : (
              <>
                <LayerBar plan={preview.plan} />
                <h3>Memory fit per node</h3>
                <MemoryFit plan={preview.plan} />
                <PlanWarnings plan={preview.plan} />
              </>
            )}
          </div>
        )}
      </div>
    </section>
  );
}
