/**
 * Router registration and the embedded router. Registrars put a cluster's coordinator into the
 * router's `backends:` list (continuum-router YAML, edited in place; or its admin API); the embedded
 * router serves that same YAML for single-machine set-ups and tests.
 */
export type { BackendEntry, Registrar, RouterConfig } from "./types.js";
export { createRegistrar, type RegistrarSettings } from "./create-registrar.js";
export { reloadingAfterEdits } from "./reload-after-edits.js";
export { DEFAULT_ADMIN_PATHS, type AdminPaths } from "./continuum-admin-registrar.js";
export { readRouterConfig, parseRouterConfig } from "./read-router-config.js";
export { watchConfig } from "./watch-config.js";
export { startRouter, type RouterOptions, type RunningRouter } from "./start-router.js";
export { defaultRelaunchMarkMs, relaunchFileOf } from "./relaunch-marks.js";
export { normaliseRequestPath, type NormalisedPath } from "./normalise-path.js";
export { watchRouterAnswers, askRouter, type RouterAnswer, type RouterAnswersWatch } from "./watch-router-answers.js";
