/**
 * Reading a launch from its timeline (the events a launch records and the status file carries):
 * pure, importing nothing, so the daemon, `shardctl status` and the dashboard's page read it alike.
 */
export { describeLaunchProgress, launchInPlaceOfCards, readLaunch, type LaunchedStatus, type LaunchMember, type LaunchRead, type TimelineEntry } from "./read-launch.js";
