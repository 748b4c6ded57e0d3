/**
 * Asks for the dashboard's token when the daemon has one configured. The token stays in this page's
 * memory (never in storage) and is sent only as the bearer header of the requests that need it.
 */
import { useEffect, useRef, useState } from "preact/hooks";

export interface TokenDialogProps {
  open: boolean;
  /** Why it is asked again (the daemon refused the last one). */
  problem: string | undefined;
  onSubmit: (token: string) => void;
  onCancel: () => void;
}

export function TokenDialog({ open, problem, onSubmit, onCancel }: TokenDialogProps) {
  const dialog = useRef<HTMLDialogElement>(null);
  const [value, setValue] = useState("");
  useEffect(() => {
    const element = dialog.current;
    if (element === null) return;
    if (open && !element.open) element.showModal();
    if (!open && element.open) element.close();
  }, [open]);
  return (
    <dialog ref={dialog} aria-labelledby="token-title" onCancel={onCancel} data-testid="token-dialog">
      <form
        method="dialog"
        onSubmit={(e) => {
          e.preventDefault();
          onSubmit(value);
          setValue("");
        }}
      >
        <h2 id="token-title">Dashboard token</h2>
        <p class="small">This daemon asks for its token ([daemon] ui_token_env) before it acts.</p>
        {problem === undefined ? null : (
          <p class="error-line" role="alert">
            {problem}
          </p>
        )}
        <label>
          Token{" "}
          <input
            type="password"
            autoComplete="off"
            required
            value={value}
            onInput={(e) => setValue((e.currentTarget as HTMLInputElement).value)}
            data-testid="token-input"
          />
        </label>
        <div class="dialog-actions">
          <button type="button" class="secondary" onClick={onCancel}>
            Cancel
          </button>
          <button type="submit">Send</button>
        </div>
      </form>
    </dialog>
  );
}
