/** Guards for our HTTP servers against web pages in the operator's browser (DNS rebinding, cross-site requests). */
export { refuseForeignRequest, type GuardOptions } from "./refuse-foreign-request.js";
