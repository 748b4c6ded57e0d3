/** Reasons of registering a cluster's backend with the router, and of the embedded router (src/router). */
export type RouterReason =
  /** `[router]` settings cannot make a registrar, e.g. continuum without config or admin_url (terminal). */
  | "RouterSettingsInvalid"
  /** The router's config file cannot be read (transient). */
  | "RouterConfigUnreadable"
  /** The router's config file is malformed; it is never overwritten (terminal). */
  | "RouterConfigInvalid"
  /** Another running cluster of this daemon is registered under the same `[router] backend` name (terminal: give each its own). */
  | "RouterBackendTaken"
  /** The daemon's user cannot create files in the router config's folder: the daemon does not start; met at a registration, the launch is tried again, not counted (terminal at start). */
  | "RouterConfigUnwritable"
  /** Registering the backend failed; terminal when the entry is invalid or the admin token variable is unset. */
  | "RouterRegistrationFailed"
  /**
   * Before a launch, the router could not list its backends (its config does not parse, its admin
   * API does not answer): nothing was started; tried again with back-off, not counted (transient).
   */
  | "RouterUnavailable"
  /** Removing the backend failed; terminal when the admin token variable is unset. */
  | "RouterDeregistrationFailed"
  /** The router's admin API failed to list backends; terminal when the admin token variable is unset. */
  | "RouterAdminFailed"
  /**
   * Registered=Unknown: the backend is in the router's list, but the router does not answer its
   * health URL (a process killed or hung, a network cut): requests through it fail. Not a failure
   * of the cluster, which keeps serving at its coordinator; Registered is True again at the router's
   * first answer.
   */
  | "RouterNotAnswering"
  /** The embedded router cannot listen on its address (transient). */
  | "RouterListenFailed"
  /** The file of models being relaunched (beside the router's YAML) could not be read or written (transient). */
  | "RouterRelaunchMarkFailed";
