// vite bundles imported stylesheets; to TypeScript they are modules without exports.
declare module "*.css";
