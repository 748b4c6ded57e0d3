/**
 * `npm run bench -- <area>`: runs bench/<area>.ts and prints its figures as JSON on stdout.
 * Each area module exports `run(args): Promise<object>`; figures are measured against a
 * baseline in the same run and quoted as ratios.
 */
const areas = ["planner", "engine", "staging", "router", "lifecycle", "reconciler", "dashboard", "faults", "engines", "nodes"] as const;

async function main(): Promise<void> {
  const [area, ...args] = process.argv.slice(2);
  if (area === undefined || !(areas as readonly string[]).includes(area)) {
    console.error(`usage: npm run bench -- <area> (one of: ${areas.join(", ")})`);
    process.exit(1);
  }
  const module = (await import(`./${area}.js`)) as { run: (args: string[]) => Promise<object> };
  const figures = await module.run(args);
  console.log(JSON.stringify({ area, at: new Date().toISOString(), ...figures }, null, 2));
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? (error.stack ?? error.message) : String(error));
  process.exit(1);
});
