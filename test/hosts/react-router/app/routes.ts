import { type RouteConfig, route } from "@react-router/dev/routes";

export default [route("webhooks", "routes/webhooks.ts")] satisfies RouteConfig;
