/** `[router] kind = "none"`: no router to tell; registration succeeds and records nothing. */
import type { Registrar } from "./types.js";

export function createNoneRegistrar(): Registrar {
  return {
    register: async () => undefined,
    deregister: async () => undefined,
    lookup: async () => undefined,
    list: async () => [],
    markRelaunching: async () => undefined,
    clearRelaunching: async () => undefined,
    markStalled: async () => undefined,
    clearStalled: async () => undefined,
    clearAllStalled: async () => undefined,
  };
}
