/**
 * A box a wide table scrolls sideways in, on a narrow screen. It takes the keyboard's focus (Tab,
 * then the arrow keys scroll it) and is a named region, so a reader who cannot use a pointer can
 * reach the columns past its edge.
 */
import type { ComponentChildren } from "preact";

export function ScrollBox({ label, children }: { label: string; children: ComponentChildren }) {
  return (
    <div class="scroll" tabIndex={0} role="region" aria-label={label}>
      {children}
    </div>
  );
}
