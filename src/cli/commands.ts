import type { Command } from "./command.js";
import { devCommand } from "./dev.js";
import { inboxCommand } from "./inbox.js";
import { schemaCommand } from "./schema.js";
import { sendCommand } from "./send.js";
import { signCommand } from "./sign.js";
import { verifyCommand } from "./verify.js";

/** Every subcommand, in the order the help lists them. A new one is one file and one line here. */
export const commands: Command[] = [sendCommand, signCommand, verifyCommand, devCommand, inboxCommand, schemaCommand];
