#!/usr/bin/env node
// The installed `overlay` command runs the compiled controller (built by `npm run build`, which
// `npm ci` runs through the prepare script).
import '../dist/src/cli/main.js';
