import type { BackendEntry, Registrar } from "./types.js";

/**
 * `registrar`, with `reload` awaited after each edit it makes (a backend registered or removed, a
 * relaunch mark set or withdrawn). The daemon's embedded router serves the file the registrar
 * edits and would otherwise see an edit only when its file watch fires (50 ms later, or seconds on a
 * loaded machine): a launch would say Ready, and `wait` return, while the router still answered 404
 * for the model.
 */
export function reloadingAfterEdits(registrar: Registrar, reload: () => Promise<unknown>): Registrar {
  const thenReload =
    <A extends unknown[]>(edit: (...args: A) => Promise<void>) =>
    async (...args: A): Promise<void> => {
      await edit(...args);
      await reload();
    };
  return {
    register: thenReload((backend) => registrar.register(backend)),
    deregister: thenReload((name) => registrar.deregister(name)),
    markRelaunching: thenReload((model, untilMs) => registrar.markRelaunching(model, untilMs)),
    clearRelaunching: thenReload((model) => registrar.clearRelaunching(model)),
    markStalled: thenReload((model, mark) => registrar.markStalled(model, mark)),
    clearStalled: thenReload((model, cluster) => registrar.clearStalled(model, cluster)),
    clearAllStalled: thenReload(() => registrar.clearAllStalled()),
    lookup: (name) => registrar.lookup(name),
    list: () => registrar.list(),
    ...(registrar.unwritable === undefined ? {} : { unwritable: () => registrar.unwritable!() }),
    ...(registrar.sweep === undefined ? {} : { sweep: thenReloadAnswer(() => registrar.sweep!(), reload) }),
  };
}

/** `run`, then `reload` when it took something back. */
function thenReloadAnswer(run: () => Promise<BackendEntry[]>, reload: () => Promise<unknown>): () => Promise<BackendEntry[]> {
  return async () => {
    const taken = await run();
    if (taken.length > 0) await reload();
    return taken;
  };
}
